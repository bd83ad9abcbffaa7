//! PIDNet semantic segmentation as a task of the training engine: its `train` recipe (the
//! official Cityscapes one), its set-up (model, data, loss), the micro-batch loss (the
//! composite PIDNet loss on the three heads), validation (mIoU at full resolution) and its
//! weights (official key names; `--init-from` an official `.pt` or ImageNet backbone).
//!
//! ```no_run
//! use burn::backend::{Autodiff, Flex};
//! use segburn_train::engine::Silent;
//! use segburn_data::{DataConfig, Layout};
//! use segburn_models::pidnet::{PidNetConfig, PidNetSize};
//! use segburn_train::pidnet::{PidNetSetup, PidNetTrainer};
//! # fn main() -> Result<(), segburn_train::TrainError> {
//! // Normally composed from a RON experiment (the cli's `experiment/pidnet.rs`).
//! let setup = PidNetSetup {
//!     model: PidNetConfig::new(PidNetSize::S, 19),
//!     data: DataConfig {
//!         layout: Layout::Cityscapes { root: "datasets/sample".into() },
//!         ..DataConfig::default()
//!     },
//!     loss: Default::default(),
//!     train: Default::default(),
//!     experiment_text: String::new(),
//! };
//! let mut trainer = PidNetTrainer::<Autodiff<Flex>>::new(setup, Default::default())?;
//! let summary = trainer.run(&mut Silent)?;
//! println!("{:?}", summary.final_report.map(|r| r.mean_iou));
//! # Ok(()) }
//! ```

mod batch_tensors;
#[cfg(test)]
mod initial_weights_tests;
mod recipe;
#[cfg(test)]
mod replica_tests;
mod setup;
mod step;
mod task;
mod validation;

pub use batch_tensors::DeviceBatch;
pub use recipe::{resolve_class_weights, PidNetRecipe, PidNetTrainConfig};
pub use setup::{PidNetSetup, PidNetSetupError};
pub use step::PidNetStep;
pub use task::PidNetTask;

use burn::tensor::backend::AutodiffBackend;

use crate::engine::{Engine, TrainError, TrainEvent};
use crate::loss::PidNetLossValues;
use crate::metric::MetricReport;

/// A PIDNet training run.
pub type PidNetTrainer<B> = Engine<B, PidNetTask>;
/// What a PIDNet run reports.
pub type PidNetEvent = TrainEvent<PidNetLossValues, MetricReport>;

impl<B: AutodiffBackend> Engine<B, PidNetTask> {
    /// Indexes the data, builds the model (freshly initialised) and the optimizer.
    pub fn new(setup: PidNetSetup, device: B::Device) -> Result<Self, TrainError> {
        Self::with_devices(setup, vec![device])
    }

    /// A data-parallel run over `devices`: each optimizer step takes `grad_accum`
    /// micro-batches per device. One device trains on the calling thread, without the
    /// replica machinery.
    pub fn with_devices(setup: PidNetSetup, devices: Vec<B::Device>) -> Result<Self, TrainError> {
        let task = PidNetTask::new(&setup)?;
        Engine::start(task, setup.train, setup.experiment_text, devices)
    }
}

//! SAM2-style promptable segmentation as a task of the training engine: objects from the data
//! crate, simulated prompts (a noisy box or a click, then correction clicks from the error
//! region, the previous logits fed back as the mask prompt), SAM2's multi-step loss, and the
//! interactive evaluation. The engine gives it what it gives PIDNet: gradient accumulation,
//! data-parallel replicas, mixed precision, cadence, the checkpoint format and exact resume.
//! See `reference/sam2-spec.md` §5–6 for the recipe followed.
//!
//! ```no_run
//! use burn::backend::{Autodiff, Flex};
//! use segburn_train::engine::Silent;
//! use segburn_train::sam2::{Sam2Setup, Sam2Trainer};
//! # fn main() -> Result<(), segburn_train::TrainError> {
//! let setup = Sam2Setup::default(); // normally composed from a RON experiment
//! let mut trainer = Sam2Trainer::<Autodiff<Flex>>::new(setup, Default::default())?;
//! let summary = trainer.run(&mut Silent)?;
//! println!("{:?}", summary.final_report);
//! # Ok(()) }
//! ```

pub mod batch;
pub mod center_click;
pub mod config;
mod config_error;
pub mod embeddings;
pub mod encoder_config;
pub mod encoder_lr;
pub mod eval;
pub mod interactive;
pub mod prompts;
mod setup;
mod step;
pub mod step_losses;
mod task;
pub mod user_prompts;
pub mod write_embeddings;

pub use config::{Sam2ModelConfig, Sam2Recipe, Sam2TrainConfig};
pub use config_error::Sam2ConfigError;
pub use encoder_config::{HieraTrunk, ImageEncoderChoice};
pub use eval::{evaluate, Sam2EvalReport};
pub use prompts::PromptConfig;
pub use setup::Sam2Setup;
pub use step::Sam2Step;
pub use step_losses::{Sam2LossValues, Sam2StepLosses};
pub use task::{Sam2Task, POSITION_BUFFER_KEY};

use burn::tensor::backend::AutodiffBackend;

use crate::engine::{Engine, TrainError, TrainEvent};

/// A SAM2 training run.
pub type Sam2Trainer<B> = Engine<B, Sam2Task>;
/// What a SAM2 run reports.
pub type Sam2Event = TrainEvent<Sam2StepLosses, Sam2EvalReport>;

impl<B: AutodiffBackend> Engine<B, Sam2Task> {
    /// Indexes the data, builds the model (freshly initialised) and the optimizer.
    pub fn new(setup: Sam2Setup, device: B::Device) -> Result<Self, TrainError> {
        Self::with_devices(setup, vec![device])
    }

    /// A data-parallel run over `devices`: each optimizer step takes `grad_accum`
    /// micro-batches per device.
    pub fn with_devices(setup: Sam2Setup, devices: Vec<B::Device>) -> Result<Self, TrainError> {
        let task = Sam2Task::new(&setup)?;
        Engine::start(task, setup.train, setup.experiment_text, devices)
    }
}

#[cfg(test)]
mod hiera_tests;
#[cfg(test)]
mod learning_tests;
#[cfg(test)]
mod mask_prompt_tests;
#[cfg(test)]
mod precision_tests;
#[cfg(test)]
mod replica_tests;
#[cfg(test)]
mod tests;

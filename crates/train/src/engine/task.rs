//! What a training task (PIDNet, SAM2) supplies to the engine: its model, its batches, one
//! micro-batch's loss, its validation, how its weights are written and read, and which
//! experiment fields a resume cannot follow. Everything else (the step loop, accumulation,
//! replicas, precision, cadence, logs, checkpoints, resume) is the engine's.

use std::fmt::Debug;
use std::path::Path;

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{FloatDType, Tensor};
use segburn_models::tensor_file::NamedTensors;
use segburn_models::weights::LoadReport;

use super::config::TrainRecipe;
use super::error::TrainError;
use crate::optim::{OptimizerSet, ParamInfo};

/// Where a micro-batch sits: what a task may seed its per-step randomness from (SAM2's
/// prompts and drop path), so that a replica and an accumulating device draw the same.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MicroBatch {
    /// The run's seed.
    pub seed: u64,
    /// The optimizer step the micro-batch belongs to (0-based: the step being taken).
    pub step: u64,
    /// Its index among the step's micro-batches over all devices (replica `r` of `n` with
    /// `grad_accum` `a` takes indices `r·a .. r·a + a`, the same as one device accumulating
    /// `n·a` in loader order).
    pub index: usize,
    /// The compute precision of the forward pass.
    pub dtype: FloatDType,
}

/// One micro-batch through the network and the loss.
pub struct MicroBatchLoss<B: AutodiffBackend, L> {
    /// The loss to differentiate; `None` when the micro-batch has nothing to learn from
    /// (a SAM2 batch without objects): it then adds no gradient.
    pub objective: Option<Tensor<B, 1>>,
    /// The host values of its terms.
    pub terms: L,
}

/// The loss terms of a step as a task reports them (logs, metrics files, progress).
pub trait LossTerms: Clone + Default + Debug + Send + 'static {
    /// The metrics-file columns of [`LossTerms::columns`], in order.
    const COLUMNS: &'static [&'static str];
    /// The backpropagated total; a non-finite one fails the step (or, with the f16 loss
    /// scaler, skips it).
    fn total(&self) -> f64;
    /// Adds one micro-batch's terms as a `1 / count` share of the step.
    fn add_share(&mut self, other: &Self, count: usize);
    /// The values of [`LossTerms::COLUMNS`] (`None`: nothing to report).
    fn columns(&self) -> Vec<Option<f64>>;
    /// One phrase for the run log and errors: `loss 1.2345 (aux … main …)`.
    fn describe(&self) -> String;
}

/// A task's validation result.
pub trait ValidationReport: Clone + Debug + Send + 'static {
    /// The metrics-file columns of [`ValidationReport::columns`], in order.
    const COLUMNS: &'static [&'static str];
    /// The number the run's history and its best checkpoint track (higher is better).
    fn headline(&self) -> f64;
    fn columns(&self) -> Vec<Option<f64>>;
    /// The run-log text of a validation at `step`.
    fn log_text(&self, step: u64) -> String;
    /// What a finished run prints of its final validation.
    fn summary(&self) -> String;
}

/// The part of a task that computes a micro-batch's loss: cloned onto every data-parallel
/// replica's thread.
pub trait TaskStep<B: AutodiffBackend>: Clone + Send + 'static {
    type Model: AutodiffModule<B> + Send + 'static;
    type Batch: Send + 'static;
    type Terms: LossTerms;

    /// Images in `batch` (for throughput).
    fn images(batch: &Self::Batch) -> usize;
    /// `model`'s loss on `batch`.
    fn loss(
        &self,
        model: &Self::Model,
        batch: Self::Batch,
        at: &MicroBatch,
        device: &B::Device,
    ) -> Result<MicroBatchLoss<B, Self::Terms>, TrainError>;
}

/// A training task.
pub trait Task<B: AutodiffBackend>: Sized + Send {
    /// Its `train` section's defaults.
    type Recipe: TrainRecipe;
    type Step: TaskStep<B>;
    type Epoch: Iterator<Item = Result<Batch<B, Self>, TrainError>>;
    type Validation: ValidationReport;

    /// The start-of-run message's description of what trains (`PIDNet-S (19 classes)`).
    fn describe(&self) -> String;
    /// The config field that sets the micro-batch size (for the "too few batches" error).
    fn batch_size_field(&self) -> (&'static str, usize);

    /// A freshly initialised model.
    fn init_model(&self, device: &B::Device) -> Model<B, Self>;
    /// The parameters the optimizer owns.
    fn trained_params(&self, model: &Model<B, Self>) -> Vec<ParamInfo>;
    /// The optimizer over `params` (groups, per-parameter learning-rate scales).
    fn optimizer(
        &self,
        params: &[ParamInfo],
    ) -> Result<OptimizerSet<Model<B, Self>, B>, TrainError>;
    /// The model's tensors under their checkpoint (official) names.
    fn export_model(&self, model: &Model<B, Self>) -> NamedTensors;
    /// `tensors` loaded into `model`, every tensor present with its shape (a resume, a
    /// replica).
    fn load_exact(
        &self,
        model: Model<B, Self>,
        tensors: &NamedTensors,
        source: &Path,
    ) -> Result<Model<B, Self>, TrainError>;
    /// Initial weights from `path` (an official file or a segburn checkpoint), reporting what
    /// matched.
    fn load_initial(
        &self,
        model: Model<B, Self>,
        path: &Path,
    ) -> Result<(Model<B, Self>, LoadReport), TrainError>;
    /// Refuses a checkpoint that cannot be this task's (before any tensor is read).
    fn check_resumable(&self, _checkpoint: &NamedTensors, _path: &Path) -> Result<(), TrainError> {
        Ok(())
    }

    /// The loss computation, cloned onto replicas.
    fn step(&self) -> Self::Step;
    /// Micro-batches the training loader yields per epoch.
    fn batches_per_epoch(&self) -> usize;
    /// The training batches of `epoch` from micro-batch `from` on.
    fn epoch(&self, epoch: u64, from: usize) -> Self::Epoch;
    /// Whether `batch` has nothing to learn from (every micro-batch of a step empty: the step
    /// changes nothing).
    fn is_empty(_batch: &Batch<B, Self>) -> bool {
        false
    }

    /// Whether the run has a validation split set up.
    fn can_validate(&self) -> bool;
    /// Evaluates `model` on the validation split.
    fn validate(
        &self,
        model: &Model<B, Self>,
        device: &B::Device,
    ) -> Result<Self::Validation, TrainError>;

    /// Experiment fields (dotted prefixes, `model.`) whose change a resume cannot follow,
    /// besides the engine's own (`train.seed`, micro-batches per step).
    fn resume_breaking_fields(&self) -> &'static [&'static str];
}

/// A task's model type.
pub type Model<B, T> = <<T as Task<B>>::Step as TaskStep<B>>::Model;
/// A task's batch type.
pub type Batch<B, T> = <<T as Task<B>>::Step as TaskStep<B>>::Batch;
/// A task's loss terms.
pub type Terms<B, T> = <<T as Task<B>>::Step as TaskStep<B>>::Terms;

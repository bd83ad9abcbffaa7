//! Why a training run (of either task) or an evaluation stopped.

use std::path::PathBuf;

use segburn_data::objects::ObjectError;
use segburn_data::DataError;
use segburn_models::pidnet::{PidNetError, PidNetImportError};
use segburn_models::sam2::Sam2Error;
use segburn_models::tensor_file::TensorFileError;

use super::config::TrainConfigError;
use crate::checkpoint::{CheckpointError, RunLockError, SeedChanged};
use crate::loss::LossError;
use crate::metric::MetricError;

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("invalid configuration: {0}")]
    TrainConfig(#[from] TrainConfigError),
    /// A task's own check of its sections (`Sam2ConfigError`, `PidNetSetupError`) failed; the
    /// message names the field and the value.
    #[error("invalid configuration: {0}")]
    TaskConfig(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Objects(#[from] ObjectError),
    #[error(transparent)]
    Loss(#[from] LossError),
    #[error(transparent)]
    PidNet(#[from] PidNetError),
    #[error(transparent)]
    PidNetImport(#[from] PidNetImportError),
    #[error(transparent)]
    Sam2(#[from] Sam2Error),
    #[error(transparent)]
    TensorFile(#[from] TensorFileError),
    /// A cached embedding file with a missing tensor or the wrong shape.
    #[error("cached embedding {path}: `{key}` {problem}")]
    Embedding {
        path: PathBuf,
        key: String,
        problem: String,
    },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Lock(#[from] RunLockError),
    #[error(transparent)]
    Metric(#[from] MetricError),
    #[error("cannot write the run log in {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the loss became non-finite at step {step} ({terms}); the last good checkpoint is {}. \
         Lower the learning rate or check the data, then resume",
        .last_checkpoint.as_ref().map_or("none (no checkpoint was saved yet)".to_string(), |p| p.display().to_string())
    )]
    NonFiniteLoss {
        step: u64,
        /// The terms as the task describes them, naming the non-finite one.
        terms: String,
        last_checkpoint: Option<PathBuf>,
    },
    #[error(
        "the training split has {batches} batches of {batch_size} ({batch_size_field}), fewer \
         than one optimizer step of {per_step} micro-batch(es) (train.grad_accum × devices); \
         lower {batch_size_field} or train.grad_accum"
    )]
    TooFewBatches {
        batches: usize,
        batch_size: usize,
        batch_size_field: &'static str,
        per_step: usize,
    },
    #[error("cannot resume: {0}")]
    Resume(String),
    #[error("cannot resume: {0}")]
    SeedChanged(#[from] SeedChanged),
}

//! Why training stopped.

use std::path::PathBuf;

use crate::checkpoint::{CheckpointError, RunLockError};
use crate::loss::{LossError, PidNetLossValues};
use crate::metric::MetricError;
use segburn_data::DataError;
use segburn_models::pidnet::{PidNetError, PidNetImportError};

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Loss(#[from] LossError),
    #[error(transparent)]
    Model(#[from] PidNetError),
    #[error(transparent)]
    Import(#[from] PidNetImportError),
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
        "the loss became non-finite at step {step} (total {:?}, aux {:?}, main {:?}, boundary {:?}, \
         boundary-aware {:?}); the last good checkpoint is {}. Lower the learning rate or check the \
         data, then resume",
        .terms.total, .terms.aux, .terms.main, .terms.boundary, .terms.bas,
        .last_checkpoint.as_ref().map_or("none (no checkpoint was saved yet)".to_string(), |p| p.display().to_string())
    )]
    NonFiniteLoss {
        step: u64,
        terms: PidNetLossValues,
        last_checkpoint: Option<PathBuf>,
    },
    #[error("the training split has {batches} batches of {batch_size}, fewer than one optimizer step of grad_accum = {grad_accum}; lower the batch size or grad_accum")]
    TooFewBatches {
        batches: usize,
        batch_size: usize,
        grad_accum: usize,
    },
    #[error("cannot resume: {0}")]
    Resume(String),
}

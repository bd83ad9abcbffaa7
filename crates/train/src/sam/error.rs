//! Why a SAM2 run (or evaluation) stopped.

use std::path::PathBuf;

use segburn_data::objects::ObjectError;
use segburn_models::sam2::Sam2Error;
use segburn_models::tensor_file::TensorFileError;

use crate::checkpoint::{CheckpointError, RunLockError};
use crate::loss::LossError;

#[derive(Debug, thiserror::Error)]
pub enum Sam2TrainError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Data(#[from] ObjectError),
    #[error(transparent)]
    Model(#[from] Sam2Error),
    #[error(transparent)]
    Loss(#[from] LossError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Lock(#[from] RunLockError),
    #[error(transparent)]
    TensorFile(#[from] TensorFileError),
    /// A cached embedding file with a missing tensor or the wrong shape.
    #[error("cached embedding {path}: `{key}` {problem}")]
    Embedding {
        path: PathBuf,
        key: String,
        problem: String,
    },
    #[error("cannot write the run log in {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the loss became non-finite at step {step} ({loss}); the last good checkpoint is {}. \
         Lower the learning rate or check the data, then resume",
        .last_checkpoint.as_ref().map_or("none (no checkpoint was saved yet)".to_string(), |p| p.display().to_string())
    )]
    NonFiniteLoss {
        step: u64,
        loss: String,
        last_checkpoint: Option<PathBuf>,
    },
    #[error(
        "the training split has {images} images, fewer than one batch of {batch_size}; lower \
         data.batch_size"
    )]
    TooFewImages { images: usize, batch_size: usize },
    #[error("cannot resume: {0}")]
    Resume(String),
}

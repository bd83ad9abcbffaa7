//! Where `eval` and `predict` get their network from: a segburn checkpoint (which also carries
//! the experiment it was trained with) or an official PIDNet `.pt` / `.pth` / `.safetensors`.
//! The paths given here are resolved already ([`resolve_checkpoint`]: a run directory or a
//! `latest` / `best` pointer names a checkpoint file).
//!
//! [`resolve_checkpoint`]: segburn_train::checkpoint::resolve_checkpoint

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use segburn_models::pidnet::{load_pidnet, load_pidnet_tensors, LoadMode, PidNet, PidNetConfig};
use segburn_train::checkpoint::{load_checkpoint, CheckpointError};

use crate::experiment::PidNetExperiment;

/// Why the weights could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelSourceError {
    /// A segburn checkpoint that cannot be read (the message names the file).
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("cannot load the weights of {}: {message}", path.display())]
    Weights { path: PathBuf, message: String },
    #[error(
        "{} is not a segburn checkpoint, so it carries no experiment; give the experiment with \
         --config FILE",
        path.display()
    )]
    NoEmbeddedExperiment { path: PathBuf },
    #[error("{}: the experiment embedded in the checkpoint is unreadable: {message}", path.display())]
    EmbeddedExperiment { path: PathBuf, message: String },
}

/// Whether `path` names an official PyTorch pickle (never a segburn checkpoint).
fn is_pickle(path: &Path) -> bool {
    let name = path.to_string_lossy().to_ascii_lowercase();
    [".pt", ".pth", ".pth.tar", ".tar", ".bin"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// The inference graph of `config` (no auxiliary heads) with the weights of `path` loaded
/// strictly: a segburn checkpoint's model, or an official PIDNet file.
pub fn load_model<B: Backend>(
    config: &PidNetConfig,
    path: &Path,
    device: &B::Device,
) -> Result<PidNet<B>, ModelSourceError> {
    let model = config.clone().with_augment(false).init::<B>(device);
    let weights_error = |message: String| ModelSourceError::Weights {
        path: path.to_path_buf(),
        message,
    };
    if !is_pickle(path) {
        match load_checkpoint(path) {
            Ok(checkpoint) => {
                return load_pidnet_tensors(model, &checkpoint.model, path, LoadMode::Strict)
                    .map(|(model, _)| model)
                    .map_err(|e| weights_error(e.to_string()));
            }
            Err(CheckpointError::NotACheckpoint { .. }) => {}
            Err(other) => return Err(other.into()),
        }
    }
    load_pidnet(model, path, LoadMode::Strict)
        .map(|(model, _)| model)
        .map_err(|e| weights_error(e.to_string()))
}

/// The experiment a segburn checkpoint was trained with.
pub fn embedded_experiment(path: &Path) -> Result<PidNetExperiment, ModelSourceError> {
    if is_pickle(path) {
        return Err(ModelSourceError::NoEmbeddedExperiment {
            path: path.to_path_buf(),
        });
    }
    let checkpoint = match load_checkpoint(path) {
        Ok(checkpoint) => checkpoint,
        Err(CheckpointError::NotACheckpoint { .. }) => {
            return Err(ModelSourceError::NoEmbeddedExperiment {
                path: path.to_path_buf(),
            })
        }
        Err(other) => return Err(other.into()),
    };
    ron::de::from_str(&checkpoint.meta.config).map_err(|e| ModelSourceError::EmbeddedExperiment {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

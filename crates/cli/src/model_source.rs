//! Where `eval` and `predict` get their network from: a segburn checkpoint (which also carries
//! the experiment it was trained with) or an official PIDNet `.pt` / `.pth` / `.safetensors`.

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use segburn_models::pidnet::{load_pidnet, load_pidnet_tensors, LoadMode, PidNet, PidNetConfig};
use segburn_train::checkpoint::{load_checkpoint, CheckpointDir, CheckpointError};

use crate::experiment::Experiment;

/// Why the weights could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelSourceError {
    /// A segburn checkpoint that cannot be read (the message names the file).
    #[error("{source}")]
    Checkpoint {
        path: PathBuf,
        #[source]
        source: CheckpointError,
    },
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

/// Follows the run's pointers: `…/checkpoints/latest` and `…/checkpoints/best` (small text files
/// naming a checkpoint), a `checkpoints/` folder or a run directory (its newest checkpoint).
/// Anything else is returned as it is.
pub fn resolve_checkpoint(path: &Path) -> PathBuf {
    let followed = if path.is_dir() {
        let checkpoints = path.join("checkpoints");
        let dir = if checkpoints.is_dir() {
            checkpoints
        } else {
            path.to_path_buf()
        };
        CheckpointDir::new(dir).latest()
    } else if path.is_file() {
        let dir = CheckpointDir::new(path.parent().unwrap_or(Path::new(".")));
        match path.file_name().and_then(|n| n.to_str()) {
            Some("latest") => dir.latest(),
            Some("best") => dir.best(),
            _ => None,
        }
    } else {
        None
    };
    followed.unwrap_or_else(|| path.to_path_buf())
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
    let resolved = resolve_checkpoint(path);
    let path = resolved.as_path();
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
            Err(source) => {
                return Err(ModelSourceError::Checkpoint {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    load_pidnet(model, path, LoadMode::Strict)
        .map(|(model, _)| model)
        .map_err(|e| weights_error(e.to_string()))
}

/// The experiment a segburn checkpoint was trained with.
pub fn embedded_experiment(path: &Path) -> Result<Experiment, ModelSourceError> {
    let resolved = resolve_checkpoint(path);
    let path = resolved.as_path();
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
        Err(source) => {
            return Err(ModelSourceError::Checkpoint {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    ron::de::from_str(&checkpoint.meta.config).map_err(|e| ModelSourceError::EmbeddedExperiment {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

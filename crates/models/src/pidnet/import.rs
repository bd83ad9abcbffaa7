//! Loading official PIDNet checkpoints and writing ours in the official format.
//!
//! Accepted: plain `state_dict` files (`.pt`, `.safetensors`), ImageNet-pretrained `.pth.tar`
//! (`{"state_dict": …}`, backbone only), Cityscapes/CamVid files (keys under `model.`, plus loss
//! buffers under `sem_loss.`), and DataParallel files (`module.`). Tensors are read without
//! executing any pickled code.

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;

use super::keys::{official_key, PIDNET_IGNORED_PREFIXES};
use super::model::PidNet;
use crate::tensor_file::{serialize_safetensors, NamedTensors, TensorFileError};
use crate::weights::{
    export_named, load_named, read_tensor_file, strip_prefixes, LoadOptions, LoadReport,
    WeightsError,
};

/// Wrapper prefixes removed from every key (nested, in any order).
const WRAPPER_PREFIXES: &[&str] = &["state_dict.", "model_state_dict.", "module.", "model."];

/// Why an import or export failed.
#[derive(Debug, thiserror::Error)]
pub enum PidNetImportError {
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(
        "{path}: the checkpoint has {file_classes} classes, the config has {config_classes}; \
         set num_classes to {file_classes}, or load it with partial loading to keep only the \
         backbone (the class heads stay freshly initialised)"
    )]
    ClassCount {
        path: PathBuf,
        file_classes: usize,
        config_classes: usize,
    },
    #[error(transparent)]
    File(#[from] TensorFileError),
}

/// Strict: every key must match. Partial: load what matches, report the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    Strict,
    Partial,
}

/// Reads a PIDNet checkpoint file into official keys (prefixes removed).
pub fn read_pidnet_tensors(path: &Path) -> Result<NamedTensors, WeightsError> {
    Ok(strip_prefixes(read_tensor_file(path)?, WRAPPER_PREFIXES))
}

/// Number of classes of the checkpoint's main head, if it has one.
pub fn checkpoint_num_classes(tensors: &NamedTensors) -> Option<usize> {
    tensors
        .get("final_layer.conv2.weight")
        .and_then(|t| t.shape.first().copied())
}

/// Loads official weights from `path` into `model`.
///
/// A model built without the auxiliary heads ignores `seghead_p.*` / `seghead_d.*`. In strict
/// mode a class-count difference is its own error, naming both counts.
pub fn load_pidnet<B: Backend>(
    model: PidNet<B>,
    path: &Path,
    mode: LoadMode,
) -> Result<(PidNet<B>, LoadReport), PidNetImportError> {
    let tensors = read_pidnet_tensors(path)?;
    load_pidnet_tensors(model, &tensors, path, mode)
}

/// [`load_pidnet`] for tensors already in memory; `path` names the source in messages.
pub fn load_pidnet_tensors<B: Backend>(
    model: PidNet<B>,
    tensors: &NamedTensors,
    path: &Path,
    mode: LoadMode,
) -> Result<(PidNet<B>, LoadReport), PidNetImportError> {
    if let Some(file_classes) = checkpoint_num_classes(tensors) {
        if mode == LoadMode::Strict && file_classes != model.num_classes {
            return Err(PidNetImportError::ClassCount {
                path: path.to_path_buf(),
                file_classes,
                config_classes: model.num_classes,
            });
        }
    }
    let source = path.display().to_string();
    let mut options = match mode {
        LoadMode::Strict => LoadOptions::strict(source),
        LoadMode::Partial => LoadOptions::partial(source),
    }
    .ignoring(PIDNET_IGNORED_PREFIXES);
    if model.seghead_p.is_none() {
        options = options.ignoring(&["seghead_p.", "seghead_d."]);
    }
    Ok(load_named(model, tensors, &official_key, &options)?)
}

/// All tensors of `model` under the official keys (what `state_dict()` would hold).
pub fn pidnet_state_dict<B: Backend>(model: &PidNet<B>) -> NamedTensors {
    export_named(model, &official_key)
}

/// Writes `model` as a `.safetensors` file that the official code loads with
/// `load_state_dict(strict=True)`.
pub fn save_pidnet_safetensors<B: Backend>(
    model: &PidNet<B>,
    path: &Path,
) -> Result<(), PidNetImportError> {
    let bytes = serialize_safetensors(&pidnet_state_dict(model), None, path)?;
    std::fs::write(path, bytes).map_err(|source| TensorFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(())
}

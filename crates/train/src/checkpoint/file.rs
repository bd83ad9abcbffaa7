//! The checkpoint file format: writing atomically, reading with verification.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use segburn_models::tensor_file::{
    parse_safetensors_with_metadata, serialize_safetensors, NamedTensors, TensorFileError,
};

use super::save_failure::{save_failure_message, PreviousCheckpoint};
use super::train_state::TrainState;

/// Bumped when the layout changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;
const FORMAT_NAME: &str = "segburn-checkpoint";

/// The metadata stored with the tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    pub format_version: u32,
    pub state: TrainState,
    /// The fully resolved experiment (RON).
    pub config: String,
    pub segburn_version: String,
    pub burn_version: String,
}

/// A loaded checkpoint.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub path: PathBuf,
    /// Model tensors under official keys (the `model.` prefix removed).
    pub model: NamedTensors,
    /// Optimizer tensors, keys as saved (`optim.…`).
    pub optimizer: NamedTensors,
    pub meta: CheckpointMeta,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] TensorFileError),
    #[error("{path} is not a segburn checkpoint (no `{FORMAT_NAME}` metadata); for official PyTorch weights use --init-from")]
    NotACheckpoint { path: PathBuf },
    #[error("{path} has checkpoint format {found}; this segburn reads format {FORMAT_VERSION}")]
    Version { path: PathBuf, found: String },
    #[error("{path} is corrupted: its tensor data does not match the checksum stored in it (expected {expected}, computed {computed}); use an earlier checkpoint")]
    Checksum {
        path: PathBuf,
        expected: String,
        computed: String,
    },
    #[error("{path}: unreadable checkpoint metadata: {message}")]
    Metadata { path: PathBuf, message: String },
    #[error("{}", save_failure_message(.path, .stage, .error, *.needed_bytes, .previous))]
    Save {
        /// The checkpoint that was being written.
        path: PathBuf,
        /// What failed: "writing …", "renaming …", "creating the directory …".
        stage: String,
        /// Not a `#[source]`: the message already says it, once.
        error: std::io::Error,
        needed_bytes: u64,
        previous: PreviousCheckpoint,
    },
}

impl CheckpointError {
    /// Whether the file may hold weights of another kind (an official `.pt`, a plain
    /// `.safetensors`) rather than being a damaged or newer segburn checkpoint.
    pub fn may_be_other_weights(&self) -> bool {
        matches!(self, Self::NotACheckpoint { .. } | Self::File(_))
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// SHA-256 over every tensor's key, dtype, shape and bytes, in key order.
fn checksum(tensors: &NamedTensors) -> String {
    let mut hasher = Sha256::new();
    for (key, data) in tensors {
        hasher.update(key.as_bytes());
        hasher.update(format!("{:?}{:?}", data.dtype, data.shape).as_bytes());
        hasher.update(data.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Which missing directories a save creates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CreateDir {
    /// The whole path (a standalone save).
    All,
    /// Only the file's own directory, inside one that must exist.
    LastLevel,
}

/// Writes a checkpoint atomically: temporary file, fsync, rename, fsync of the directory.
/// Returns the file size in bytes. A failed save removes its temporary file.
pub fn save_checkpoint(
    path: &Path,
    model: &NamedTensors,
    optimizer: &NamedTensors,
    meta: &CheckpointMeta,
) -> Result<u64, CheckpointError> {
    save_checkpoint_in(path, model, optimizer, meta, CreateDir::All)
}

pub(crate) fn save_checkpoint_in(
    path: &Path,
    model: &NamedTensors,
    optimizer: &NamedTensors,
    meta: &CheckpointMeta,
    create: CreateDir,
) -> Result<u64, CheckpointError> {
    let mut tensors: NamedTensors = model
        .iter()
        .map(|(k, v)| (format!("model.{k}"), v.clone()))
        .collect();
    tensors.extend(optimizer.iter().map(|(k, v)| (k.clone(), v.clone())));
    let metadata = HashMap::from([
        ("format".to_string(), FORMAT_NAME.to_string()),
        ("format_version".to_string(), FORMAT_VERSION.to_string()),
        ("checksum".to_string(), checksum(&tensors)),
        (
            "meta".to_string(),
            serde_json::to_string(meta).map_err(|e| CheckpointError::Metadata {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?,
        ),
    ]);
    let bytes = serialize_safetensors(&tensors, Some(metadata), path)?;
    let failed = |stage: String, error| CheckpointError::Save {
        path: path.to_path_buf(),
        stage,
        error,
        needed_bytes: bytes.len() as u64,
        previous: PreviousCheckpoint::Unknown,
    };

    let dir = path.parent().unwrap_or(Path::new("."));
    let created = match create {
        _ if dir.is_dir() => Ok(()),
        CreateDir::All => std::fs::create_dir_all(dir),
        CreateDir::LastLevel => std::fs::create_dir(dir),
    };
    created.map_err(|e| failed(format!("creating the directory {}", dir.display()), e))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{file_name}.partial"));
    let written = write_durably(&temporary, &bytes)
        .map_err(|e| failed(format!("writing {}", temporary.display()), e))
        .and_then(|()| {
            std::fs::rename(&temporary, path)
                .map_err(|e| failed(format!("renaming {}", temporary.display()), e))
        });
    if let Err(error) = written {
        // A full disk must not stay full of our own leftovers.
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    sync_dir(dir);
    Ok(bytes.len() as u64)
}

/// Creates `path` with `bytes` and flushes it to the disk.
pub(crate) fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a rename durable (POSIX); a no-op where directories cannot be opened (Windows).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// Reads and verifies a checkpoint.
pub fn load_checkpoint(path: &Path) -> Result<Checkpoint, CheckpointError> {
    let bytes = std::fs::read(path).map_err(io_error(path))?;
    let (tensors, metadata) = parse_safetensors_with_metadata(&bytes, path)?;
    if metadata.get("format").map(String::as_str) != Some(FORMAT_NAME) {
        return Err(CheckpointError::NotACheckpoint {
            path: path.to_path_buf(),
        });
    }
    let version = metadata.get("format_version").cloned().unwrap_or_default();
    if version != FORMAT_VERSION.to_string() {
        return Err(CheckpointError::Version {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let expected = metadata.get("checksum").cloned().unwrap_or_default();
    let computed = checksum(&tensors);
    if expected != computed {
        return Err(CheckpointError::Checksum {
            path: path.to_path_buf(),
            expected,
            computed,
        });
    }
    let meta: CheckpointMeta = serde_json::from_str(
        metadata.get("meta").map(String::as_str).unwrap_or(""),
    )
    .map_err(|e| CheckpointError::Metadata {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut model = NamedTensors::new();
    let mut optimizer = NamedTensors::new();
    for (key, data) in tensors {
        match key.strip_prefix("model.") {
            Some(rest) => {
                model.insert(rest.to_string(), data);
            }
            None => {
                optimizer.insert(key, data);
            }
        }
    }
    Ok(Checkpoint {
        path: path.to_path_buf(),
        model,
        optimizer,
        meta,
    })
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;

    use super::*;
    use crate::checkpoint::train_state::example_state;

    fn meta() -> CheckpointMeta {
        CheckpointMeta {
            format_version: FORMAT_VERSION,
            state: example_state(),
            config: "(model: ())".into(),
            segburn_version: "0.1.0".into(),
            burn_version: "0.21.0".into(),
        }
    }

    fn tensors() -> (NamedTensors, NamedTensors) {
        let model = NamedTensors::from([
            (
                "conv.weight".to_string(),
                TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]),
            ),
            (
                "bn.num_batches_tracked".to_string(),
                TensorData::new(vec![3i64], Vec::<usize>::new()),
            ),
        ]);
        let optim = NamedTensors::from([(
            "optim.conv.weight.momentum_buffer".to_string(),
            TensorData::new(vec![0.5f32; 4], [2, 2]),
        )]);
        (model, optim)
    }

    #[test]
    fn round_trip_keeps_tensors_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("données d'essai 数据.safetensors");
        let (model, optim) = tensors();
        save_checkpoint(&path, &model, &optim, &meta()).unwrap();
        let loaded = load_checkpoint(&path).unwrap();
        assert_eq!(loaded.meta, meta());
        assert_eq!(loaded.model.len(), 2);
        assert_eq!(
            loaded.model["conv.weight"].as_bytes(),
            model["conv.weight"].as_bytes()
        );
        assert_eq!(loaded.optimizer.len(), 1);
        assert!(!dir
            .path()
            .join(".données d'essai 数据.safetensors.partial")
            .exists());
    }

    #[test]
    fn truncated_and_bit_flipped_files_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt.safetensors");
        let (model, optim) = tensors();
        save_checkpoint(&path, &model, &optim, &meta()).unwrap();
        let bytes = std::fs::read(&path).unwrap();

        let truncated = dir.path().join("truncated.safetensors");
        std::fs::write(&truncated, &bytes[..bytes.len() - 5]).unwrap();
        let err = load_checkpoint(&truncated).unwrap_err().to_string();
        assert!(err.contains("truncated.safetensors"), "{err}");

        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        let corrupted = dir.path().join("flipped.safetensors");
        std::fs::write(&corrupted, &flipped).unwrap();
        let err = load_checkpoint(&corrupted).unwrap_err().to_string();
        assert!(
            err.contains("corrupted") && err.contains("flipped.safetensors"),
            "{err}"
        );
    }

    #[test]
    fn official_weights_are_not_mistaken_for_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.safetensors");
        let (model, _) = tensors();
        std::fs::write(&path, serialize_safetensors(&model, None, &path).unwrap()).unwrap();
        let err = load_checkpoint(&path).unwrap_err().to_string();
        assert!(err.contains("--init-from"), "{err}");
    }
}

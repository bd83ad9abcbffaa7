//! Named tensors in `.safetensors` files, read and written without Burn tensors.
//!
//! One reader serves the reference fixtures, official checkpoints and our own checkpoint files,
//! so every place that touches a tensor file reports errors the same way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::tensor::{DType, TensorData};
use safetensors::{Dtype, SafeTensors};

/// Named tensors in insertion-independent (sorted) order.
pub type NamedTensors = BTreeMap<String, TensorData>;

/// Reading or writing a tensor file failed.
#[derive(Debug, thiserror::Error)]
pub enum TensorFileError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid safetensors file (truncated or corrupted?): {message}")]
    Format { path: PathBuf, message: String },
    #[error("{path}: tensor `{key}` has dtype {dtype}, which segburn does not read")]
    UnsupportedDtype {
        path: PathBuf,
        key: String,
        dtype: String,
    },
    #[error("{path}: no tensor named `{key}`")]
    MissingKey { path: PathBuf, key: String },
    #[error("cannot write {path}: {message}")]
    Write { path: PathBuf, message: String },
}

/// Reads every tensor of a safetensors file.
pub fn read_safetensors(path: &Path) -> Result<NamedTensors, TensorFileError> {
    let bytes = std::fs::read(path).map_err(|source| TensorFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_safetensors(&bytes, path)
}

/// Parses safetensors bytes and the file's string metadata (`__metadata__`).
pub fn parse_safetensors_with_metadata(
    bytes: &[u8],
    path: &Path,
) -> Result<(NamedTensors, std::collections::HashMap<String, String>), TensorFileError> {
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| TensorFileError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let metadata = header.metadata().clone().unwrap_or_default();
    Ok((parse_safetensors(bytes, path)?, metadata))
}

/// Parses safetensors bytes; `path` only names the source in errors.
pub fn parse_safetensors(bytes: &[u8], path: &Path) -> Result<NamedTensors, TensorFileError> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| TensorFileError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut out = NamedTensors::new();
    for (key, view) in file.tensors() {
        let dtype = match view.dtype() {
            Dtype::F32 => DType::F32,
            Dtype::F64 => DType::F64,
            Dtype::F16 => DType::F16,
            Dtype::BF16 => DType::BF16,
            Dtype::I64 => DType::I64,
            Dtype::I32 => DType::I32,
            Dtype::U8 => DType::U8,
            Dtype::I8 => DType::I8,
            Dtype::BOOL => DType::Bool(burn::tensor::BoolStore::Native),
            other => {
                return Err(TensorFileError::UnsupportedDtype {
                    path: path.to_path_buf(),
                    key,
                    dtype: format!("{other:?}"),
                })
            }
        };
        let data = TensorData::from_bytes_vec(view.data().to_vec(), view.shape().to_vec(), dtype);
        out.insert(key, data);
    }
    Ok(out)
}

fn safetensors_dtype(dtype: DType) -> Option<Dtype> {
    Some(match dtype {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I64 => Dtype::I64,
        DType::I32 => Dtype::I32,
        DType::U8 => Dtype::U8,
        DType::I8 => Dtype::I8,
        _ => return None,
    })
}

/// Serialises named tensors (and string metadata) to safetensors bytes.
pub fn serialize_safetensors(
    tensors: &NamedTensors,
    metadata: Option<std::collections::HashMap<String, String>>,
    path: &Path,
) -> Result<Vec<u8>, TensorFileError> {
    let mut views = Vec::with_capacity(tensors.len());
    for (key, data) in tensors {
        let dtype =
            safetensors_dtype(data.dtype).ok_or_else(|| TensorFileError::UnsupportedDtype {
                path: path.to_path_buf(),
                key: key.clone(),
                dtype: format!("{:?}", data.dtype),
            })?;
        let view =
            safetensors::tensor::TensorView::new(dtype, data.shape.to_vec(), data.as_bytes())
                .map_err(|e| TensorFileError::Write {
                    path: path.to_path_buf(),
                    message: format!("tensor `{key}`: {e}"),
                })?;
        views.push((key.clone(), view));
    }
    safetensors::tensor::serialize(views, metadata).map_err(|e| TensorFileError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Takes one tensor out of a set, with an error naming the file and key.
pub fn take(
    tensors: &mut NamedTensors,
    key: &str,
    path: &Path,
) -> Result<TensorData, TensorFileError> {
    tensors
        .remove(key)
        .ok_or_else(|| TensorFileError::MissingKey {
            path: path.to_path_buf(),
            key: key.to_string(),
        })
}

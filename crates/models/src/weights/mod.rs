//! Official PyTorch weights in and out: reading `.pt` / `.safetensors` files, matching their keys to
//! our module paths, and writing our modules back out under the official key names.
//!
//! A model provides one function, `key_of(our_path) -> official_key`, that maps the dotted path
//! Burn derives from our field names (`layer1.0.conv1.weight`, `compression3.conv.weight`) to the
//! official key (`compression3.0.weight`). Everything else is generic.

mod apply;
mod export;
mod read;
mod report;

pub use apply::{load_named, LoadOptions};
pub use export::export_named;
pub use read::{read_tensor_file, strip_prefixes};
pub use report::LoadReport;

use std::path::PathBuf;

use crate::tensor_file::TensorFileError;

/// Why weights could not be read or applied.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error(transparent)]
    File(#[from] TensorFileError),
    #[error("cannot read PyTorch file {path}: {message} (is it truncated or not a torch.save file?)")]
    Pytorch { path: PathBuf, message: String },
    #[error("{path} holds no tensors")]
    Empty { path: PathBuf },
    #[error("strict load from {source_name} failed:\n{report}")]
    Strict {
        source_name: String,
        report: Box<LoadReport>,
    },
}

/// Keys of running statistics and counters: buffers, not trained parameters.
pub fn is_buffer_key(key: &str) -> bool {
    matches!(
        key.rsplit('.').next(),
        Some("running_mean" | "running_var" | "num_batches_tracked")
    )
}

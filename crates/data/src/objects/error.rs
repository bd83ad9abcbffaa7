//! Errors of the object data: the data layer's own errors plus what only objects can get
//! wrong. Every variant names the file or field it is about.

use std::path::PathBuf;

use crate::error::DataError;

/// Why objects could not be indexed or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// Reading, decoding or indexing failed.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A configuration value that cannot work.
    #[error("invalid configuration `{field}`: {message}")]
    Config { field: String, message: String },
    /// An image without its cached embedding file.
    #[error(
        "no cached embedding for image {image}: expected {expected} (write them with \
         `train-sam2 CONFIG --write-embeddings`)"
    )]
    MissingEmbedding { image: PathBuf, expected: PathBuf },
    /// An image without its per-object mask folder or instance map.
    #[error("no object masks for image {image}: expected {expected}")]
    MissingObjects { image: PathBuf, expected: PathBuf },
    /// A mask whose size differs from its image's.
    #[error(
        "size mismatch: {mask} is {mask_width}x{mask_height} (w x h) but the image {image} is \
         {image_width}x{image_height}"
    )]
    MaskSize {
        mask: PathBuf,
        image: PathBuf,
        mask_width: usize,
        mask_height: usize,
        image_width: usize,
        image_height: usize,
    },
    /// A worker thread panicked: a bug in segburn, reported instead of a hang.
    #[error("the object loader thread stopped unexpectedly before batch {batch} of epoch {epoch}")]
    LoaderStopped { epoch: u64, batch: usize },
}

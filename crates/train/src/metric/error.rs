//! Errors of the metrics.

use std::path::PathBuf;

use thiserror::Error;

/// A metric could not be updated or written.
#[derive(Debug, Error)]
pub enum MetricError {
    /// A ground-truth pixel is neither a class nor the ignore index.
    #[error(
        "ground-truth value {value} is neither a class id (0..{num_classes}) nor the ignore \
         index {ignore_index}"
    )]
    LabelOutOfRange {
        /// The offending value.
        value: i64,
        /// Number of classes of the matrix.
        num_classes: usize,
        /// The ignore index.
        ignore_index: i64,
    },
    /// Predictions and labels cover a different number of pixels.
    #[error("{predictions} predictions for {labels} ground-truth pixels")]
    LengthMismatch {
        /// Number of predicted pixels.
        predictions: usize,
        /// Number of ground-truth pixels.
        labels: usize,
    },
    /// Two matrices (or a matrix and a name list) disagree on the classes.
    #[error("class count mismatch: {expected} expected, got {got}")]
    ClassCountMismatch {
        /// Classes of the receiving matrix.
        expected: usize,
        /// Classes of the other side.
        got: usize,
    },
    /// Writing a report failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

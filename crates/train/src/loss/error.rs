//! Errors of the loss functions.

use thiserror::Error;

/// A loss could not be computed from the given inputs.
///
/// These are user mistakes (a label map with a stray class id, a class-weight list for another
/// dataset), so they are reported as values rather than panics or out-of-range reads.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LossError {
    /// A target pixel holds a value that is neither a class nor the ignore index.
    #[error(
        "target value {value} is neither a class id (0..{num_classes}) nor the ignore index \
         {ignore_index} ({count} pixel(s) carry it)"
    )]
    TargetOutOfRange {
        /// The first offending value found.
        value: i64,
        /// How many pixels carry that value.
        count: usize,
        /// Number of classes of the logits.
        num_classes: usize,
        /// The configured ignore index.
        ignore_index: i64,
    },
    /// The class-weight vector does not have one entry per class.
    #[error(
        "class_weights has {got} entries but the logits have {expected} classes \
         (one weight per class is needed)"
    )]
    ClassWeightsLength {
        /// Number of classes of the logits.
        expected: usize,
        /// Length of the given weight vector.
        got: usize,
    },
    /// Two inputs that must agree in shape do not.
    #[error("shape mismatch: {what} (expected {expected:?}, got {got:?})")]
    ShapeMismatch {
        /// Which inputs disagree.
        what: &'static str,
        /// The shape implied by the logits.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
    },
    /// A configuration value is outside its valid range.
    #[error("invalid loss configuration: {0}")]
    InvalidConfig(String),
}

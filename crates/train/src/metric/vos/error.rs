//! Errors of the video-object-segmentation measures.

use thiserror::Error;

/// A J / F measure or the DAVIS statistics could not be computed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum VosError {
    /// A mask's pixel buffer does not hold `height × width` values.
    #[error("a {height}×{width} mask needs {expected} pixels, got {got}")]
    PixelCount {
        /// Rows of the mask.
        height: usize,
        /// Columns of the mask.
        width: usize,
        /// `height × width`.
        expected: usize,
        /// Length of the buffer given.
        got: usize,
    },
    /// Two masks (prediction, ground truth, void) of one comparison differ in size.
    #[error("{what}: {got_height}×{got_width} does not match the ground truth's {height}×{width}")]
    SizeMismatch {
        /// Which mask or frame differs.
        what: String,
        /// Rows of the ground truth.
        height: usize,
        /// Columns of the ground truth.
        width: usize,
        /// Rows of the other mask.
        got_height: usize,
        /// Columns of the other mask.
        got_width: usize,
    },
    /// The boundary tolerance is negative, not finite or gives a disk wider than supported.
    #[error(
        "invalid boundary tolerance {bound_th}: a fraction of the diagonal (< 1) or pixels \
         (>= 1), finite, >= 0, at most a radius of {max_radius} pixels"
    )]
    InvalidBoundTh {
        /// The tolerance given.
        bound_th: f64,
        /// The largest disk radius accepted.
        max_radius: f64,
    },
    /// Statistics over no values (a sequence with no evaluated frame, a split with no object).
    #[error("{what}: nothing to average")]
    Empty {
        /// What was empty.
        what: String,
    },
    /// A per-frame value is NaN (the measures never produce one).
    #[error("per-frame value {index} is NaN")]
    NotANumber {
        /// Its position.
        index: usize,
    },
    /// Prediction and ground truth have a different number of frames.
    #[error("sequence {sequence}: {predicted} predicted frames for {annotated} annotated frames")]
    FrameCount {
        /// The sequence.
        sequence: String,
        /// Frames of the prediction.
        predicted: usize,
        /// Frames of the ground truth.
        annotated: usize,
    },
    /// Semi-supervised evaluation needs a first and a last frame besides the evaluated ones.
    #[error(
        "sequence {sequence}: {frames} frames; at least 3 are needed (the first and the last \
         are not evaluated)"
    )]
    TooFewFrames {
        /// The sequence.
        sequence: String,
        /// Its frame count.
        frames: usize,
    },
    /// The prediction has an object id the first annotated frame does not have.
    #[error(
        "sequence {sequence}: predicted object id {predicted} but the first frame annotates \
         {objects} objects"
    )]
    UnknownObject {
        /// The sequence.
        sequence: String,
        /// The largest predicted id.
        predicted: u8,
        /// Objects of the first annotated frame.
        objects: u8,
    },
}

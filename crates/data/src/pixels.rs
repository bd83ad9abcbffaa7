//! The decoded pixel buffers: an RGB image and a label map of training ids.
//!
//! They sit below `decode` and `orientation` so that both can use them while `decode` alone
//! calls `orientation` (the types are re-exported as `decode::{RgbImage, LabelImage}`).

/// An 8-bit RGB image, interleaved (`[r, g, b, r, g, b, ...]`, row-major).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RgbImage {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

/// A label map of training ids (`0..num_classes` or the ignore index), row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelImage {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

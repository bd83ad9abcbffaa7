//! Pillow's `Image.resize` for 8-bit RGB, bit for bit: the convolution resampler of Pillow's
//! `src/libImaging/Resample.c` (followed for Pillow 13.0.0; checked against Pillow's own output
//! by the fixtures of `tests/fixtures/pillow_resize/`).
//!
//! The official SAM 2 video predictor loads each frame with
//! `Image.open(p).convert("RGB").resize((s, s))`, whose default filter is BICUBIC; with
//! [`resize_rgb8`]`(rgb, [h, w], [s, s], PillowFilter::Bicubic)` segburn gets the same uint8
//! pixels.
//!
//! How Pillow resamples (and so how this does):
//! - Each axis gets its own table of taps: output index `i` is centred on the input coordinate
//!   `(i + 0.5) * scale` (`scale = in / out`); the filter is stretched by `max(scale, 1)` (so a
//!   downscale averages over its footprint and an upscale interpolates), the taps cover
//!   `center ± support` rounded to whole pixels and clipped to the image, and their weights,
//!   computed in f64, are divided by their sum and then turned into signed fixed point with
//!   22 fractional bits, rounded half away from zero.
//! - Usually the horizontal pass runs first, over only the input rows the vertical taps use,
//!   and the vertical pass then runs on that u8 intermediate image; Pillow 13.0.0 runs the
//!   vertical pass first when the height shrinks by more than twice as many pixels as the
//!   width (see `vertical_pass_first`). A pass whose size does not change is skipped (an
//!   unchanged size in both is a copy).
//! - A pass sums `pixel * weight` in i32 from `1 << 21` (the rounding half) and keeps
//!   `sum >> 22` clamped to `0..=255`.

mod filters;
mod passes;

use std::fmt;

pub use filters::PillowFilter;
use passes::{horizontal, vertical, Taps};

/// Why [`resize_rgb8`] refused its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PillowResizeError {
    /// `rgb` does not hold `height * width * 3` bytes.
    BufferLength {
        height: usize,
        width: usize,
        expected: usize,
        actual: usize,
    },
    /// An input or output side is 0 (Pillow cannot hold an empty image to resize).
    ZeroSize {
        input: [usize; 2],
        output: [usize; 2],
    },
    /// A side exceeds what Pillow's C code (`int` sizes) handles, or a buffer would overflow.
    TooLarge {
        input: [usize; 2],
        output: [usize; 2],
    },
}

impl fmt::Display for PillowResizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PillowResizeError::BufferLength {
                height,
                width,
                expected,
                actual,
            } => write!(
                f,
                "RGB buffer of {actual} bytes for a {height}x{width} image \
                 (expected {height} * {width} * 3 = {expected})"
            ),
            PillowResizeError::ZeroSize { input, output } => write!(
                f,
                "cannot resize {}x{} to {}x{} (height x width): a side is 0",
                input[0], input[1], output[0], output[1]
            ),
            PillowResizeError::TooLarge { input, output } => write!(
                f,
                "cannot resize {}x{} to {}x{} (height x width): a side exceeds {} or the \
                 buffers would overflow",
                input[0],
                input[1],
                output[0],
                output[1],
                i32::MAX
            ),
        }
    }
}

impl std::error::Error for PillowResizeError {}

/// Resizes an 8-bit RGB image (`height * width * 3` bytes, rows top to bottom, RGB
/// interleaved) to `[out_height, out_width]` exactly as Pillow's
/// `Image.resize((out_width, out_height), filter)` does for an `RGB` image (no `box`, no
/// `reducing_gap`). The same size returns a copy.
pub fn resize_rgb8(
    rgb: &[u8],
    [height, width]: [usize; 2],
    [out_height, out_width]: [usize; 2],
    filter: PillowFilter,
) -> Result<Vec<u8>, PillowResizeError> {
    let (input, output) = ([height, width], [out_height, out_width]);
    if [height, width, out_height, out_width].contains(&0) {
        return Err(PillowResizeError::ZeroSize { input, output });
    }
    let limit = i32::MAX as usize;
    let too_large = [height, width, out_height, out_width]
        .iter()
        .any(|&side| side > limit)
        || height
            .checked_mul(width)
            .and_then(|n| n.checked_mul(3))
            .is_none()
        || out_height
            .checked_mul(out_width)
            .and_then(|n| n.checked_mul(3))
            .is_none();
    if too_large {
        return Err(PillowResizeError::TooLarge { input, output });
    }
    let expected = height * width * 3;
    if rgb.len() != expected {
        return Err(PillowResizeError::BufferLength {
            height,
            width,
            expected,
            actual: rgb.len(),
        });
    }
    if vertical_pass_first([height, width], [out_height, out_width]) {
        let vertical_taps = Taps::new(height, out_height, filter);
        let resized_columns = vertical(rgb, width, 0, &vertical_taps);
        let horizontal_taps = Taps::new(width, out_width, filter);
        return Ok(horizontal(
            &resized_columns,
            width,
            0,
            out_height,
            &horizontal_taps,
        ));
    }
    // Pillow's ImagingResampleInner: the vertical taps first (they say which input rows the
    // horizontal pass needs), then horizontal, then vertical; unchanged sides are skipped.
    let vertical_taps = (out_height != height).then(|| Taps::new(height, out_height, filter));
    let resized_rows;
    let (src, row_offset) = if out_width != width {
        let (row0, rows) = match &vertical_taps {
            Some(taps) => {
                let last = out_height - 1;
                let end = taps.first[last] + taps.count[last];
                (taps.first[0], end - taps.first[0])
            }
            None => (0, height),
        };
        let horizontal_taps = Taps::new(width, out_width, filter);
        resized_rows = horizontal(rgb, width, row0, rows, &horizontal_taps);
        (&resized_rows[..], row0)
    } else {
        (rgb, 0)
    };
    Ok(match &vertical_taps {
        Some(taps) => vertical(src, out_width, row_offset, taps),
        None => src.to_vec(),
    })
}

/// Whether Pillow 13.0.0 runs the vertical pass before the horizontal one: when both sides
/// change, the height shrinks, and it loses more than twice as many pixels as the width
/// (`in_h - out_h > 2 * (in_w - out_w)`; always so when the width grows). Otherwise the
/// horizontal pass runs first, as in earlier Pillow. The order matters because the
/// intermediate image is rounded to u8. This rule was measured, not read: the Pillow source
/// available here predates 13.0.0, and the rule reproduces Pillow 13.0.0's output on every
/// probed size (see tests/fixtures/pillow_resize/README.md).
fn vertical_pass_first([height, width]: [usize; 2], [out_height, out_width]: [usize; 2]) -> bool {
    let (h, w, oh, ow) = (
        height as i64,
        width as i64,
        out_height as i64,
        out_width as i64,
    );
    ow != w && oh < h && h - oh > 2 * (w - ow)
}

#[cfg(test)]
mod tests;

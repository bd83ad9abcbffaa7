//! The taps of one axis and the two 8-bit passes (`precompute_coeffs`,
//! `normalize_coeffs_8bpc`, `ImagingResampleHorizontal_8bpc` and
//! `ImagingResampleVertical_8bpc` of Pillow's `src/libImaging/Resample.c`) for RGB.

use super::PillowFilter;

/// The fractional bits of the fixed-point weights (Pillow's `PRECISION_BITS`, `32 - 8 - 2`).
const PRECISION_BITS: u32 = 22;

/// The taps of one axis: for output index `i`, the input indices
/// `first[i] .. first[i] + count[i]` with the fixed-point weights
/// `weights[i * stride ..][..count[i]]`.
pub(super) struct Taps {
    pub(super) first: Vec<usize>,
    pub(super) count: Vec<usize>,
    stride: usize,
    weights: Vec<i32>,
}

impl Taps {
    /// Pillow's `precompute_coeffs` over the whole axis (box `0 .. in_size`) followed by
    /// `normalize_coeffs_8bpc`.
    pub(super) fn new(in_size: usize, out_size: usize, filter: PillowFilter) -> Taps {
        let kernel = filter.kernel();
        // Pillow's box edges are C floats: `(double)(in1 - in0) / outSize`.
        let (in0, in1) = (0.0f32, in_size as f32);
        let scale = f64::from(in1 - in0) / out_size as f64;
        let filter_scale = scale.max(1.0);
        let support = kernel.support * filter_scale;
        let stride = support.ceil() as usize * 2 + 1;
        let inv_filter_scale = 1.0 / filter_scale;
        let mut first = Vec::with_capacity(out_size);
        let mut count = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * stride];
        let mut row = vec![0f64; stride];
        for (i, out) in weights.chunks_exact_mut(stride).enumerate() {
            let center = f64::from(in0) + (i as f64 + 0.5) * scale;
            // C's `(int)` truncates toward zero; `as` does the same (and saturates).
            let lo = ((center - support + 0.5) as i64).max(0);
            let hi = ((center + support + 0.5) as i64).min(in_size as i64);
            let n = (hi - lo).max(0) as usize;
            let mut sum = 0.0;
            for (x, w) in row[..n].iter_mut().enumerate() {
                *w = (kernel.weight)(((x as i64 + lo) as f64 - center + 0.5) * inv_filter_scale);
                sum += *w;
            }
            for (w, fixed) in row[..n].iter().zip(out.iter_mut()) {
                let w = if sum != 0.0 { *w / sum } else { *w };
                let scaled = w * f64::from(1u32 << PRECISION_BITS);
                *fixed = if w < 0.0 {
                    (-0.5 + scaled) as i32
                } else {
                    (0.5 + scaled) as i32
                };
            }
            first.push(lo as usize);
            count.push(n);
        }
        Taps {
            first,
            count,
            stride,
            weights,
        }
    }

    fn of(&self, i: usize) -> (usize, &[i32]) {
        let start = i * self.stride;
        (self.first[i], &self.weights[start..start + self.count[i]])
    }
}

/// Pillow's `clip8`: the integer part of a fixed-point sum, clamped to a byte.
#[inline]
fn clip8(sum: i32) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The rounding half every sum starts from.
const HALF: i32 = 1 << (PRECISION_BITS - 1);

/// The horizontal pass over `rows` rows of `src` (`in_width` RGB pixels each) starting at row
/// `row0`: `rows` rows of `taps.count.len()` pixels.
pub(super) fn horizontal(
    src: &[u8],
    in_width: usize,
    row0: usize,
    rows: usize,
    taps: &Taps,
) -> Vec<u8> {
    let out_width = taps.first.len();
    let mut out = vec![0u8; rows * out_width * 3];
    let src_rows = src.chunks_exact(in_width * 3).skip(row0);
    for (line_in, line_out) in src_rows.zip(out.chunks_exact_mut(out_width * 3)) {
        for (i, pixel) in line_out.chunks_exact_mut(3).enumerate() {
            let (first, weights) = taps.of(i);
            let line = &line_in[first * 3..(first + weights.len()) * 3];
            let (mut r, mut g, mut b) = (HALF, HALF, HALF);
            for (rgb, &w) in line.chunks_exact(3).zip(weights) {
                // Integer sums: any order gives Pillow's value (wrapping like its C `int`).
                r = r.wrapping_add(i32::from(rgb[0]).wrapping_mul(w));
                g = g.wrapping_add(i32::from(rgb[1]).wrapping_mul(w));
                b = b.wrapping_add(i32::from(rgb[2]).wrapping_mul(w));
            }
            pixel.copy_from_slice(&[clip8(r), clip8(g), clip8(b)]);
        }
    }
    out
}

/// The vertical pass: `taps.count.len()` rows from the rows of `src` (`width` RGB pixels
/// each), tap row indices counted from `src`'s first row minus `row_offset`.
pub(super) fn vertical(src: &[u8], width: usize, row_offset: usize, taps: &Taps) -> Vec<u8> {
    let line = width * 3;
    let out_height = taps.first.len();
    let mut out = vec![0u8; out_height * line];
    let mut sums = vec![0i32; line];
    for (i, line_out) in out.chunks_exact_mut(line).enumerate() {
        let (first, weights) = taps.of(i);
        sums.fill(HALF);
        for (y, &w) in weights.iter().enumerate() {
            let start = (first - row_offset + y) * line;
            for (sum, &v) in sums.iter_mut().zip(&src[start..start + line]) {
                *sum = sum.wrapping_add(i32::from(v).wrapping_mul(w));
            }
        }
        for (o, &sum) in line_out.iter_mut().zip(&sums) {
            *o = clip8(sum);
        }
    }
    out
}

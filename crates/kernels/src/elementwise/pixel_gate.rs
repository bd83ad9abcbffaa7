//! PagFM's pixel gate: the per-pixel dot product over channels of two feature maps (the gate's
//! logit) and the blend `x·(1 − s) + y·s` with a per-pixel weight `s`, and their gradients.
//!
//! Burn computes both through broadcasts over the channel dimension, which Flex walks element
//! by element with strided indices; here each is one pass over contiguous planes.

use std::ops::{Add, Mul, Sub};

use rayon::prelude::*;

/// The gate's `[N, C, P]` shape (P = H·W), a batch norm's.
pub use crate::norm::NormGeometry as GateGeometry;

/// The float types of the gate (f32 and f64).
pub trait GateFloat:
    Copy + Send + Sync + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + 'static
{
    const ZERO: Self;
    const ONE: Self;
}

impl GateFloat for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

impl GateFloat for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
}

/// Positions of one parallel task: a few pages of each plane.
const POSITIONS_PER_TASK: usize = 4096;

/// `Σ_c a[n, c, p] · b[n, c, p]`, `[N, P]`: each product rounded, then added in channel order.
///
/// # Panics
/// If the slices are not `[N, C, P]` (a caller bug: both come from tensor shapes).
pub fn channel_dot<T: GateFloat>(a: &[T], b: &[T], g: &GateGeometry) -> Vec<T> {
    assert_eq!(a.len(), g.len(), "first operand of {g:?}");
    assert_eq!(b.len(), g.len(), "second operand of {g:?}");
    sum_over_channels(g, |i| a[i] * b[i])
}

/// `Σ_c term(index of (n, c, p))` for every `(n, p)`, `[N, P]`, added in channel order; in
/// parallel over blocks of positions.
fn sum_over_channels<T: GateFloat>(g: &GateGeometry, term: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let mut out = vec![T::ZERO; g.batch * g.plane];
    let plane = g.plane.max(1);
    // Each task sums the channels of one block of one image's positions, in place in `out`.
    out.par_chunks_mut(plane)
        .enumerate()
        .flat_map(|(n, sums)| {
            sums.par_chunks_mut(POSITIONS_PER_TASK)
                .enumerate()
                .map(move |(k, sums)| (n, k * POSITIONS_PER_TASK, sums))
        })
        .for_each(|(n, start, sums)| {
            for c in 0..g.channels {
                let at = (n * g.channels + c) * plane + start;
                for (k, sum) in sums.iter_mut().enumerate() {
                    *sum = *sum + term(at + k);
                }
            }
        });
    out
}

/// `out[n, c, p] = f(index of (n, c, p), s[n, p])` over `[N, C, P]`, in parallel over planes.
fn per_pixel_map<T: GateFloat>(
    g: &GateGeometry,
    s: &[T],
    f: impl Fn(usize, T) -> T + Sync,
) -> Vec<T> {
    assert_eq!(s.len(), g.batch * g.plane, "per-pixel operand of {g:?}");
    let mut out = vec![T::ZERO; g.len()];
    let plane = g.plane.max(1);
    out.par_chunks_mut(plane).enumerate().for_each(|(i, out)| {
        let n = i / g.channels.max(1);
        let s = &s[n * plane..(n + 1) * plane];
        for (k, (out, &s)) in out.iter_mut().zip(s).enumerate() {
            *out = f(i * plane + k, s);
        }
    });
    out
}

/// `x[n, c, p] · s[n, p]`: the gradient of [`channel_dot`] with respect to one operand is the
/// other scaled by the output's gradient.
///
/// # Panics
/// If the slices do not have `g`'s shapes (a caller bug).
pub fn scale_by_pixel<T: GateFloat>(x: &[T], s: &[T], g: &GateGeometry) -> Vec<T> {
    assert_eq!(x.len(), g.len(), "x of {g:?}");
    per_pixel_map(g, s, |i, s| x[i] * s)
}

/// `x·(1 − s) + y·s` with `s` `[N, P]` broadcast over the channels of `x` and `y` `[N, C, P]`:
/// the operations of `x * (-s + 1) + y * s` one by one, so the same bits.
///
/// # Panics
/// If the slices do not have `g`'s shapes (a caller bug).
pub fn gate_blend<T: GateFloat>(x: &[T], y: &[T], s: &[T], g: &GateGeometry) -> Vec<T> {
    assert_eq!(x.len(), g.len(), "x of {g:?}");
    assert_eq!(y.len(), g.len(), "y of {g:?}");
    per_pixel_map(g, s, |i, s| x[i] * (T::ONE - s) + y[i] * s)
}

/// `[dx, dy, ds]` of [`gate_blend`] given `dL/dout` (`[N, C, P]`): `dout·(1 − s)`, `dout·s`
/// and `Σ_c dout·(y − x)`.
///
/// # Panics
/// If the slices do not have `g`'s shapes (a caller bug).
pub fn gate_blend_grad<T: GateFloat>(
    x: &[T],
    y: &[T],
    s: &[T],
    output_grad: &[T],
    g: &GateGeometry,
) -> [Vec<T>; 3] {
    assert_eq!(x.len(), g.len(), "x of {g:?}");
    assert_eq!(y.len(), g.len(), "y of {g:?}");
    assert_eq!(output_grad.len(), g.len(), "output gradient of {g:?}");
    let dx = per_pixel_map(g, s, |i, s| output_grad[i] * (T::ONE - s));
    let dy = per_pixel_map(g, s, |i, s| output_grad[i] * s);
    let ds = sum_over_channels(g, |i| output_grad[i] * (y[i] - x[i]));
    [dx, dy, ds]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::test_values as values;

    fn geometries() -> [GateGeometry; 4] {
        let g = |batch, channels, plane| GateGeometry {
            batch,
            channels,
            plane,
        };
        // One position, odd sizes, and planes longer than one task.
        [g(1, 1, 1), g(2, 3, 37), g(1, 64, 5000), g(3, 5, 9000)]
    }

    #[test]
    fn channel_dot_matches_the_definition_within_rounding() {
        for (i, g) in geometries().iter().enumerate() {
            let a = values(g.len(), 1 + i as u64);
            let b = values(g.len(), 50 + i as u64);
            let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
            let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
            let got64 = channel_dot(&a, &b, g);
            let got32 = channel_dot(&a32, &b32, g);
            for n in 0..g.batch {
                for p in 0..g.plane {
                    let at = |c: usize| (n * g.channels + c) * g.plane + p;
                    let terms = (0..g.channels).map(|c| {
                        (
                            f64::from(a32[at(c)]) * f64::from(b32[at(c)]),
                            a[at(c)] * b[at(c)],
                        )
                    });
                    let (want32, magnitude, want64) =
                        terms.fold((0.0, 0.0, 0.0), |(s32, m, s64), (t32, t64): (f64, f64)| {
                            (s32 + t32, m + t32.abs(), s64 + t64)
                        });
                    let k = n * g.plane + p;
                    // n products and n − 1 additions, each within ε of its exact value.
                    let bound = 2.0 * g.channels as f64 * f64::from(f32::EPSILON) * magnitude;
                    assert!(
                        (f64::from(got32[k]) - want32).abs() <= bound,
                        "{g:?} f32 at {k}: {} vs {want32}",
                        got32[k]
                    );
                    assert!(
                        (got64[k] - want64).abs() <= 1e-13 * (1.0 + want64.abs()),
                        "{g:?} f64 at {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn gate_blend_gives_the_bits_of_the_separate_operations() {
        for (i, g) in geometries().iter().enumerate() {
            let x: Vec<f32> = values(g.len(), 3 + i as u64)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let y: Vec<f32> = values(g.len(), 9 + i as u64)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let s: Vec<f32> = values(g.batch * g.plane, 17 + i as u64)
                .iter()
                .map(|&v| (v * 0.5 + 0.5) as f32)
                .collect();
            let got = gate_blend(&x, &y, &s, g);
            for (k, &got) in got.iter().enumerate() {
                let n = k / (g.channels * g.plane);
                let s = s[n * g.plane + k % g.plane];
                let want = x[k] * (-s + 1.0) + y[k] * s;
                assert_eq!(got.to_bits(), want.to_bits(), "{g:?} at {k}");
            }
        }
    }

    #[test]
    fn gradients_match_their_definitions() {
        for (i, g) in geometries().iter().enumerate() {
            let [x, y, dout] = [5, 6, 7].map(|k| values(g.len(), 10 * k + i as u64));
            let s: Vec<f64> = values(g.batch * g.plane, 80 + i as u64)
                .iter()
                .map(|&v| v * 0.5 + 0.5)
                .collect();
            let [dx, dy, ds] = gate_blend_grad(&x, &y, &s, &dout, g);
            let scaled = scale_by_pixel(&x, &s, g);
            for k in 0..g.len() {
                let (n, p) = (k / (g.channels * g.plane), k % g.plane);
                let s = s[n * g.plane + p];
                assert_eq!(dx[k], dout[k] * (1.0 - s), "{g:?} dx at {k}");
                assert_eq!(dy[k], dout[k] * s, "{g:?} dy at {k}");
                assert_eq!(scaled[k], x[k] * s, "{g:?} scaled at {k}");
            }
            for n in 0..g.batch {
                for p in 0..g.plane {
                    let at = |c: usize| (n * g.channels + c) * g.plane + p;
                    let want: f64 = (0..g.channels)
                        .map(|c| dout[at(c)] * (y[at(c)] - x[at(c)]))
                        .sum();
                    let got = ds[n * g.plane + p];
                    assert!((got - want).abs() <= 1e-13 * (1.0 + want.abs()), "{g:?} ds");
                }
            }
        }
    }
}

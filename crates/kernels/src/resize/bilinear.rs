//! Bilinear interpolation (PyTorch's `F.interpolate(mode='bilinear')`, both `align_corners`
//! values) and its input gradient on plain row-major NCHW slices.
//!
//! Each output pixel is `Σ wy·wx·x` over two source rows and two source columns, so the resize
//! is separable, `Y = A_y · X · A_xᵀ` per (image, channel) plane: the forward pass first
//! interpolates the source rows it needs to the output width (a gather), then mixes pairs of
//! those rows (contiguous, vectorised); the input gradient is the adjoint in reverse order,
//! `dX = A_yᵀ · dY · A_x`. Planes are independent, so both run in parallel over planes on the
//! compute pool, each writing only its own plane (no shared accumulation, no data race).
//!
//! Source coordinates follow PyTorch's `area_pixel_compute_source_index`, computed in f64 as
//! Flex does: with `align_corners = false`, `src = max((dst + 0.5) · in / out − 0.5, 0)`; with
//! `true`, `src = dst · (in − 1) / (out − 1)` (0 when `out == 1`). The taps are `floor(src)`
//! and the next index clamped to the last, weighted `1 − λ` and `λ = src − floor(src)`.

use std::ops::{Add, AddAssign, Mul};

use rayon::prelude::*;

/// The float types the kernels run in.
pub trait BilinearFloat:
    Copy + Default + Send + Sync + Add<Output = Self> + Mul<Output = Self> + AddAssign + 'static
{
    fn from_f64(value: f64) -> Self;
}

impl BilinearFloat for f32 {
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

impl BilinearFloat for f64 {
    fn from_f64(value: f64) -> Self {
        value
    }
}

/// The shapes of one resize: `planes` = N·C planes of `in_size` resized to `out_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BilinearGeometry {
    pub planes: usize,
    pub in_size: [usize; 2],
    pub out_size: [usize; 2],
    pub align_corners: bool,
}

impl BilinearGeometry {
    fn in_plane(&self) -> usize {
        self.in_size[0] * self.in_size[1]
    }

    fn out_plane(&self) -> usize {
        self.out_size[0] * self.out_size[1]
    }

    /// The taps of each output coordinate along `axis` (0: rows, 1: columns).
    pub(super) fn taps<T: BilinearFloat>(&self, axis: usize) -> Vec<Tap<T>> {
        let (input, output) = (self.in_size[axis], self.out_size[axis]);
        let scale = if self.align_corners {
            if output > 1 {
                (input as f64 - 1.0) / (output as f64 - 1.0)
            } else {
                0.0
            }
        } else {
            input as f64 / output as f64
        };
        (0..output)
            .map(|dst| {
                let src = if self.align_corners {
                    dst as f64 * scale
                } else {
                    ((dst as f64 + 0.5) * scale - 0.5).max(0.0)
                };
                let low = (src.floor() as usize).min(input - 1);
                let lambda = src - low as f64;
                Tap {
                    low,
                    high: (low + 1).min(input - 1),
                    low_weight: T::from_f64(1.0 - lambda),
                    high_weight: T::from_f64(lambda),
                }
            })
            .collect()
    }

    /// The checks both kernels make.
    fn check(&self, input_len: usize, output_len: usize) {
        assert!(
            self.in_size.iter().all(|&s| s > 0),
            "bilinear resize of an empty input: {self:?}"
        );
        assert_eq!(
            input_len,
            self.planes * self.in_plane(),
            "input of {self:?}"
        );
        assert_eq!(
            output_len,
            self.planes * self.out_plane(),
            "output of {self:?}"
        );
    }
}

/// One output coordinate's two source indices and their weights.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tap<T> {
    pub(super) low: usize,
    pub(super) high: usize,
    pub(super) low_weight: T,
    pub(super) high_weight: T,
}

/// The tables every plane shares: row and column taps, and which source rows any tap reads
/// (a downsampling skips the others).
struct Tables<T> {
    rows: Vec<Tap<T>>,
    cols: Vec<Tap<T>>,
    used_rows: Vec<bool>,
}

impl<T: BilinearFloat> Tables<T> {
    fn new(g: &BilinearGeometry) -> Self {
        let rows = g.taps(0);
        let mut used_rows = vec![false; g.in_size[0]];
        for tap in &rows {
            used_rows[tap.low] = true;
            used_rows[tap.high] = true;
        }
        Self {
            rows,
            cols: g.taps(1),
            used_rows,
        }
    }
}

/// Runs `kernel(tables, widened, dst plane, src plane)` on every plane, in parallel; `widened`
/// is per-task scratch of `in_h` rows at the output width.
fn for_each_plane<T: BilinearFloat>(
    g: &BilinearGeometry,
    (dst, dst_plane): (&mut [T], usize),
    (src, src_plane): (&[T], usize),
    kernel: impl Fn(&Tables<T>, &mut [T], &mut [T], &[T]) + Sync,
) {
    if dst.is_empty() || src.is_empty() {
        return;
    }
    let tables = Tables::<T>::new(g);
    // Several planes per task where planes are tiny, so that the pool's overhead stays small.
    let per_task = (1 << 15) / (g.in_plane() + g.out_plane()) + 1;
    dst.par_chunks_mut(dst_plane)
        .zip(src.par_chunks(src_plane))
        .with_min_len(per_task)
        .for_each_init(
            || vec![T::default(); g.in_size[0] * g.out_size[1]],
            |widened, (dst, src)| kernel(&tables, widened, dst, src),
        );
}

/// `F.interpolate(x, out_size, mode='bilinear', align_corners)` of `x` (`[planes, in_h, in_w]`
/// row-major), `[planes, out_h, out_w]`.
///
/// # Panics
/// If `x.len()` does not match `geometry` or the input is empty (caller bugs: both come from
/// tensor shapes).
pub fn bilinear_forward<T: BilinearFloat>(x: &[T], geometry: &BilinearGeometry) -> Vec<T> {
    let g = geometry;
    let mut out = vec![T::default(); g.planes * g.out_plane()];
    g.check(x.len(), out.len());
    let (in_w, out_w) = (g.in_size[1], g.out_size[1]);
    let (out_plane, in_plane) = (g.out_plane(), g.in_plane());
    for_each_plane(
        g,
        (&mut out, out_plane),
        (x, in_plane),
        |tables, widened, out, x| {
            // Source rows at the output width.
            for (iy, row) in x.chunks_exact(in_w).enumerate() {
                if !tables.used_rows[iy] {
                    continue;
                }
                let wide = &mut widened[iy * out_w..(iy + 1) * out_w];
                for (value, tap) in wide.iter_mut().zip(&tables.cols) {
                    *value = row[tap.low] * tap.low_weight + row[tap.high] * tap.high_weight;
                }
            }
            // Each output row mixes two of them.
            for (out_row, tap) in out.chunks_exact_mut(out_w).zip(&tables.rows) {
                let low = &widened[tap.low * out_w..(tap.low + 1) * out_w];
                let high = &widened[tap.high * out_w..(tap.high + 1) * out_w];
                for ((value, &a), &b) in out_row.iter_mut().zip(low).zip(high) {
                    *value = a * tap.low_weight + b * tap.high_weight;
                }
            }
        },
    );
    out
}

/// `dL/dx` (`[planes, in_h, in_w]`) of [`bilinear_forward`] given `dL/doutput`
/// (`[planes, out_h, out_w]`): every output gradient added to its four source pixels with the
/// forward pass's weights.
///
/// # Panics
/// If `output_grad.len()` does not match `geometry` or the input is empty (caller bugs).
pub fn bilinear_input_grad<T: BilinearFloat>(
    output_grad: &[T],
    geometry: &BilinearGeometry,
) -> Vec<T> {
    let g = geometry;
    let mut grad = vec![T::default(); g.planes * g.in_plane()];
    g.check(grad.len(), output_grad.len());
    let (in_w, out_w) = (g.in_size[1], g.out_size[1]);
    let (out_plane, in_plane) = (g.out_plane(), g.in_plane());
    let planes = (output_grad, out_plane);
    for_each_plane(
        g,
        (&mut grad, in_plane),
        planes,
        |tables, widened, grad, output_grad| {
            // Adjoint of the row mix: each output row's gradient onto its two source rows.
            widened.fill(T::default());
            for (grad_row, tap) in output_grad.chunks_exact(out_w).zip(&tables.rows) {
                let low = tap.low * out_w..(tap.low + 1) * out_w;
                for (value, &d) in widened[low].iter_mut().zip(grad_row) {
                    *value += d * tap.low_weight;
                }
                let high = tap.high * out_w..(tap.high + 1) * out_w;
                for (value, &d) in widened[high].iter_mut().zip(grad_row) {
                    *value += d * tap.high_weight;
                }
            }
            // Adjoint of the widening: each column onto its two source columns.
            for (iy, row) in grad.chunks_exact_mut(in_w).enumerate() {
                if !tables.used_rows[iy] {
                    continue;
                }
                let wide = &widened[iy * out_w..(iy + 1) * out_w];
                for (&d, tap) in wide.iter().zip(&tables.cols) {
                    row[tap.low] += d * tap.low_weight;
                    row[tap.high] += d * tap.high_weight;
                }
            }
        },
    );
    grad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::test_values as values;

    /// Every `(x index, y index, weight)` of the resize by PyTorch's formulas, written out per
    /// output pixel with no shared code with the kernels.
    fn connections(g: &BilinearGeometry) -> Vec<(usize, usize, f64)> {
        let source = |dst: usize, input: usize, output: usize| -> [(usize, f64); 2] {
            let src = if g.align_corners {
                if output == 1 {
                    0.0
                } else {
                    dst as f64 * (input - 1) as f64 / (output - 1) as f64
                }
            } else {
                f64::max((dst as f64 + 0.5) * input as f64 / output as f64 - 0.5, 0.0)
            };
            let i0 = src as usize;
            let i1 = if i0 + 1 < input { i0 + 1 } else { i0 };
            let lambda = src - i0 as f64;
            [(i0, 1.0 - lambda), (i1, lambda)]
        };
        let ([ih, iw], [oh, ow]) = (g.in_size, g.out_size);
        let mut all = Vec::new();
        for p in 0..g.planes {
            for oy in 0..oh {
                for ox in 0..ow {
                    for (iy, wy) in source(oy, ih, oh) {
                        for (ix, wx) in source(ox, iw, ow) {
                            let xi = (p * ih + iy) * iw + ix;
                            let yi = (p * oh + oy) * ow + ox;
                            all.push((xi, yi, wy * wx));
                        }
                    }
                }
            }
        }
        all
    }

    fn close(got: &[f64], want: &[f64], tol: f64) -> bool {
        got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(a, b)| a.is_finite() && (a - b).abs() <= tol * (1.0 + b.abs()))
    }

    #[test]
    fn matches_the_definition_on_odd_shapes() {
        let sizes = [
            ([3, 5], [7, 9]),     // upsampling, non-integer ratios
            ([8, 16], [64, 128]), // PIDNet's ×8
            ([9, 7], [4, 3]),     // downsampling, non-integer
            ([6, 5], [1, 1]),     // output size 1
            ([1, 4], [5, 1]),     // input size 1 along one axis
            ([5, 5], [5, 5]),     // identity size
            ([4, 7], [11, 2]),    // up along one axis, down along the other
        ];
        for (in_size, out_size) in sizes {
            for align_corners in [false, true] {
                let g = BilinearGeometry {
                    planes: 3,
                    in_size,
                    out_size,
                    align_corners,
                };
                let x = values(g.planes * g.in_plane(), 3);
                let dy = values(g.planes * g.out_plane(), 5);
                let (mut y, mut dx) = (vec![0.0; dy.len()], vec![0.0; x.len()]);
                for (xi, yi, w) in connections(&g) {
                    y[yi] += w * x[xi];
                    dx[xi] += w * dy[yi];
                }
                assert!(close(&bilinear_forward(&x, &g), &y, 1e-13), "forward {g:?}");
                assert!(
                    close(&bilinear_input_grad(&dy, &g), &dx, 1e-13),
                    "grad {g:?}"
                );
                let narrow = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<f32>>();
                let wide = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
                // f32: a few roundings of terms below 1 in size; a gradient sums up to 16 terms per axis
                // (the ×8 case), each adding an f32 rounding.
                let y32 = wide(bilinear_forward(&narrow(&x), &g));
                let dx32 = wide(bilinear_input_grad(&narrow(&dy), &g));
                assert!(close(&y32, &y, 1e-6), "f32 forward {g:?}");
                assert!(close(&dx32, &dx, 1e-5), "f32 grad {g:?}");
            }
        }
    }

    #[test]
    fn matches_pytorch_on_a_known_case() {
        // torch: F.interpolate([[1, 2], [3, 4]], size=(4, 4), mode="bilinear", align_corners=…)
        // first row: [1.0, 1.25, 1.75, 2.0] (False); [1.0, 4/3, 5/3, 2.0] (True).
        let x = [1.0, 2.0, 3.0, 4.0];
        for (align_corners, want) in [
            (false, [1.0, 1.25, 1.75, 2.0]),
            (true, [1.0, 4.0 / 3.0, 5.0 / 3.0, 2.0]),
        ] {
            let g = BilinearGeometry {
                planes: 1,
                in_size: [2, 2],
                out_size: [4, 4],
                align_corners,
            };
            let y = bilinear_forward(&x, &g);
            assert!(close(&y[..4], &want, 1e-15), "{align_corners}: {y:?}");
        }
    }
}

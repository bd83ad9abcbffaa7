//! Layer normalisation over one axis and its gradients, on row-major slices `[outer, C, inner]`:
//! the statistics are taken over the `C` values of each position `(outer, inner)`.
//!
//! `nn.LayerNorm` over the last dimension is `inner = 1` (each position a contiguous row);
//! SAM2's `LayerNorm2d` of `[N, C, H, W]` is `outer = N`, `inner = H·W` (each position a pixel,
//! its channels `H·W` apart). Forward, per position: `mean`, the biased `var`, `x̂ = (x − mean)
//! / √(var + eps)` and `y = x̂ · weight_c + bias_c`. Backward, with `g = dy · weight_c`:
//! `dx = (g − mean_c(g) − x̂ · mean_c(g · x̂)) / √(var + eps)`, `dweight_c = Σ dy · x̂` and
//! `dbias_c = Σ dy` over all positions.
//!
//! Why our own: composed from Burn's ops a layer norm is some eight passes each way, each
//! allocating a tensor, and Flex broadcasts the per-position statistics of `LayerNorm2d` over
//! the channels slowly: SAM2's decoder spent 0.68 ms on the 64×32×32 norm of its upscaling,
//! PyTorch 0.13 ms. Here the forward reads the input three times and writes once, the backward
//! reads the input and the gradient three times and writes once. Sums run in f64 in a fixed
//! order (per position over the channels; per channel over pieces of fixed size), so the
//! results do not depend on the number of threads.

use rayon::prelude::*;

use crate::float::NormFloat;

/// Positions per task where the channels of a position are strided (`inner > 1`).
const PIXELS: usize = 256;
/// Rows per task where they are contiguous (`inner = 1`).
const ROWS: usize = 64;
/// Independent accumulators of a row's sum: enough for the compiler to vectorise it.
const LANES: usize = 8;

/// The `[outer, C, inner]` shape of the activations, `C` the normalised axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerGeometry {
    pub outer: usize,
    pub channels: usize,
    pub inner: usize,
}

impl LayerGeometry {
    /// `[outer, C, inner]` of a tensor of shape `dims` normalised along `axis`; `None` if the
    /// axis is out of range.
    pub fn of(dims: &[usize], axis: usize) -> Option<Self> {
        let channels = *dims.get(axis)?;
        Some(Self {
            outer: dims[..axis].iter().product(),
            channels,
            inner: dims[axis + 1..].iter().product(),
        })
    }

    pub fn len(&self) -> usize {
        self.outer * self.channels * self.inner
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn positions(&self) -> usize {
        self.outer * self.inner
    }
}

/// Per position (`outer · inner` of them, row-major): the mean over the channels and
/// `1 / √(var + eps)`.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerStatistics {
    pub mean: Vec<f64>,
    pub inv_std: Vec<f64>,
}

/// `Σ f(a_i, b_i)` over a row, in `LANES` interleaved partial sums added in a fixed order.
#[inline(always)]
fn lane_sum<T: NormFloat>(a: &[T], b: &[T], f: impl Fn(f64, f64) -> f64) -> f64 {
    let mut lanes = [0.0f64; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (a, b) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            lanes[lane] += f(a[lane].to_f64(), b[lane].to_f64());
        }
    }
    let tail: f64 = a_rest
        .iter()
        .zip(b_rest)
        .map(|(&a, &b)| f(a.to_f64(), b.to_f64()))
        .sum();
    lanes.iter().sum::<f64>() + tail
}

fn to_f64<T: NormFloat>(values: &[T]) -> Vec<f64> {
    values.iter().map(|v| v.to_f64()).collect()
}

/// Runs `task(image, start, a, b)` in parallel over runs of at most `PIXELS` positions of each
/// image, `a` and `b` being the run's slices of two per-position outputs (`[outer · inner]`,
/// zeroed or to be overwritten): the planes' pass over one run of pixels, channel by channel.
fn for_each_pixel_run(
    a: &mut [f64],
    b: &mut [f64],
    inner: usize,
    task: impl Fn(usize, usize, &mut [f64], &mut [f64]) + Sync,
) {
    a.par_chunks_mut(inner)
        .zip(b.par_chunks_mut(inner))
        .enumerate()
        .for_each(|(image, (a, b))| {
            a.par_chunks_mut(PIXELS)
                .zip(b.par_chunks_mut(PIXELS))
                .enumerate()
                .for_each(|(piece, (a, b))| task(image, piece * PIXELS, a, b));
        });
}

/// `(y, statistics)` of the layer norm.
///
/// # Panics
/// If the lengths do not match `g` (a caller bug: they come from tensor shapes).
pub fn layer_norm_forward<T: NormFloat>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    eps: f64,
    g: &LayerGeometry,
) -> (Vec<T>, LayerStatistics) {
    assert_eq!(x.len(), g.len());
    assert!(weight.len() == g.channels && bias.len() == g.channels);
    let (weight, bias) = (to_f64(weight), to_f64(bias));
    let mut y = vec![T::default(); x.len()];
    let mut statistics = LayerStatistics {
        mean: vec![0.0; g.positions()],
        inv_std: vec![0.0; g.positions()],
    };
    if g.is_empty() {
        return (y, statistics);
    }
    let c = g.channels;
    let count = c as f64;
    if g.inner == 1 {
        // Rows: the statistics and the output of a row in one task.
        y.par_chunks_mut(ROWS * c)
            .zip(x.par_chunks(ROWS * c))
            .zip(
                (statistics.mean.par_chunks_mut(ROWS)).zip(statistics.inv_std.par_chunks_mut(ROWS)),
            )
            .for_each(|((y, x), (means, inv_stds))| {
                for (((y, x), mean_out), inv_out) in y
                    .chunks_exact_mut(c)
                    .zip(x.chunks_exact(c))
                    .zip(means.iter_mut())
                    .zip(inv_stds.iter_mut())
                {
                    let mean = lane_sum(x, x, |v, _| v) / count;
                    let var = lane_sum(x, x, |v, _| (v - mean) * (v - mean)) / count;
                    let inv_std = 1.0 / (var + eps).sqrt();
                    for (((y, &v), &w), &b) in y.iter_mut().zip(x).zip(&weight).zip(&bias) {
                        *y = T::from_f64((v.to_f64() - mean) * inv_std * w + b);
                    }
                    (*mean_out, *inv_out) = (mean, inv_std);
                }
            });
        return (y, statistics);
    }
    // Planes: the statistics of a run of pixels, summed channel by channel across the run...
    let inner = g.inner;
    let (means, inv_stds) = (&mut statistics.mean, &mut statistics.inv_std);
    for_each_pixel_run(means, inv_stds, inner, |o, start, means, inv_stds| {
        let len = means.len();
        let image = &x[o * c * inner..(o + 1) * c * inner];
        let channel = |k: usize| &image[k * inner + start..][..len];
        let mut sums = [0.0f64; PIXELS];
        let sums = &mut sums[..len];
        for k in 0..c {
            for (s, &v) in sums.iter_mut().zip(channel(k)) {
                *s += v.to_f64();
            }
        }
        for (m, s) in means.iter_mut().zip(sums.iter_mut()) {
            *m = *s / count;
            *s = 0.0;
        }
        for k in 0..c {
            for ((s, &v), &m) in sums.iter_mut().zip(channel(k)).zip(means.iter()) {
                *s += (v.to_f64() - m) * (v.to_f64() - m);
            }
        }
        for (inv, s) in inv_stds.iter_mut().zip(sums.iter()) {
            *inv = 1.0 / (*s / count + eps).sqrt();
        }
    });
    // ...then the output plane by plane.
    y.par_chunks_mut(inner)
        .zip(x.par_chunks(inner))
        .enumerate()
        .for_each(|(plane, (y, x))| {
            let (o, k) = (plane / c, plane % c);
            let at = o * inner..(o + 1) * inner;
            let (means, inv_stds) = (&statistics.mean[at.clone()], &statistics.inv_std[at]);
            let (w, b) = (weight[k], bias[k]);
            for (((y, &v), &m), &inv) in y.iter_mut().zip(x).zip(means).zip(inv_stds) {
                *y = T::from_f64((v.to_f64() - m) * inv * w + b);
            }
        });
    (y, statistics)
}

/// `(dx, dweight, dbias)` of [`layer_norm_forward`] given `dy` and the statistics it returned.
///
/// # Panics
/// If the lengths do not match `g`.
pub fn layer_norm_backward<T: NormFloat>(
    x: &[T],
    weight: &[T],
    statistics: &LayerStatistics,
    output_grad: &[T],
    g: &LayerGeometry,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    assert!(x.len() == g.len() && output_grad.len() == g.len());
    assert_eq!(weight.len(), g.channels);
    assert!(statistics.mean.len() == g.positions() && statistics.inv_std.len() == g.positions());
    let weight = to_f64(weight);
    let c = g.channels;
    let mut dx = vec![T::default(); x.len()];
    let (dweight, dbias) = if g.is_empty() {
        (vec![0.0; c], vec![0.0; c])
    } else if g.inner == 1 {
        rows_backward(x, &weight, statistics, output_grad, &mut dx, c)
    } else {
        planes_backward(x, &weight, statistics, output_grad, &mut dx, g)
    };
    let narrow = |values: Vec<f64>| values.into_iter().map(T::from_f64).collect();
    (dx, narrow(dweight), narrow(dbias))
}

/// The backward pass over contiguous rows of `c` values; returns `(dweight, dbias)`.
fn rows_backward<T: NormFloat>(
    x: &[T],
    weight: &[f64],
    statistics: &LayerStatistics,
    output_grad: &[T],
    dx: &mut [T],
    c: usize,
) -> (Vec<f64>, Vec<f64>) {
    let count = c as f64;
    let partial: Vec<(Vec<f64>, Vec<f64>)> = dx
        .par_chunks_mut(ROWS * c)
        .zip(x.par_chunks(ROWS * c).zip(output_grad.par_chunks(ROWS * c)))
        .enumerate()
        .map(|(piece, (dx, (x, dy)))| {
            let (mut dweight, mut dbias) = (vec![0.0f64; c], vec![0.0f64; c]);
            let rows = dx
                .chunks_exact_mut(c)
                .zip(x.chunks_exact(c).zip(dy.chunks_exact(c)));
            for (row, (dx, (x, dy))) in rows.enumerate() {
                let position = piece * ROWS + row;
                let (mean, inv_std) = (statistics.mean[position], statistics.inv_std[position]);
                let x_hat = |v: T| (v.to_f64() - mean) * inv_std;
                // Σ g and Σ g · x̂ over the row, with g = dy · weight.
                let (mut sum_g, mut sum_g_xhat) = ([0.0f64; LANES], [0.0f64; LANES]);
                for (k, (&v, &d)) in x.iter().zip(dy).enumerate() {
                    let g = d.to_f64() * weight[k];
                    sum_g[k % LANES] += g;
                    sum_g_xhat[k % LANES] += g * x_hat(v);
                }
                let mean_g = sum_g.iter().sum::<f64>() / count;
                let mean_g_xhat = sum_g_xhat.iter().sum::<f64>() / count;
                for (k, ((dx, &v), &d)) in dx.iter_mut().zip(x).zip(dy).enumerate() {
                    let (d, x_hat) = (d.to_f64(), x_hat(v));
                    *dx = T::from_f64(inv_std * (d * weight[k] - mean_g - x_hat * mean_g_xhat));
                    dweight[k] += d * x_hat;
                    dbias[k] += d;
                }
            }
            (dweight, dbias)
        })
        .collect();
    let (mut dweight, mut dbias) = (vec![0.0f64; c], vec![0.0f64; c]);
    for (w, b) in &partial {
        for k in 0..c {
            dweight[k] += w[k];
            dbias[k] += b[k];
        }
    }
    (dweight, dbias)
}

/// The backward pass where a position's channels are `inner` apart; returns
/// `(dweight, dbias)`.
fn planes_backward<T: NormFloat>(
    x: &[T],
    weight: &[f64],
    statistics: &LayerStatistics,
    output_grad: &[T],
    dx: &mut [T],
    g: &LayerGeometry,
) -> (Vec<f64>, Vec<f64>) {
    let (c, inner) = (g.channels, g.inner);
    let count = c as f64;
    // Per position: mean_c(g) and mean_c(g · x̂), summed channel by channel over runs of pixels.
    let mut mean_g = vec![0.0f64; g.positions()];
    let mut mean_g_xhat = vec![0.0f64; g.positions()];
    for_each_pixel_run(
        &mut mean_g,
        &mut mean_g_xhat,
        inner,
        |o, start, mean_g, mean_g_xhat| {
            let len = mean_g.len();
            let at = o * inner + start;
            let means = &statistics.mean[at..at + len];
            let inv_stds = &statistics.inv_std[at..at + len];
            for (k, &w) in weight.iter().enumerate() {
                let plane = (o * c + k) * inner + start;
                let (x, dy) = (&x[plane..plane + len], &output_grad[plane..plane + len]);
                for p in 0..len {
                    let gp = dy[p].to_f64() * w;
                    mean_g[p] += gp;
                    mean_g_xhat[p] += gp * (x[p].to_f64() - means[p]) * inv_stds[p];
                }
            }
            for (s, sx) in mean_g.iter_mut().zip(mean_g_xhat.iter_mut()) {
                *s /= count;
                *sx /= count;
            }
        },
    );
    // Then dx plane by plane, with each plane's Σ dy · x̂ and Σ dy.
    let per_plane: Vec<(f64, f64)> = dx
        .par_chunks_mut(inner)
        .zip(x.par_chunks(inner).zip(output_grad.par_chunks(inner)))
        .enumerate()
        .map(|(plane, (dx, (x, dy)))| {
            let (o, k) = (plane / c, plane % c);
            let at = o * inner..(o + 1) * inner;
            let (means, inv_stds) = (
                &statistics.mean[at.clone()],
                &statistics.inv_std[at.clone()],
            );
            let (mg, mgx) = (&mean_g[at.clone()], &mean_g_xhat[at]);
            let w = weight[k];
            let (mut dweight, mut dbias) = ([0.0f64; LANES], [0.0f64; LANES]);
            for p in 0..inner {
                let d = dy[p].to_f64();
                let x_hat = (x[p].to_f64() - means[p]) * inv_stds[p];
                dx[p] = T::from_f64(inv_stds[p] * (d * w - mg[p] - x_hat * mgx[p]));
                dweight[p % LANES] += d * x_hat;
                dbias[p % LANES] += d;
            }
            (dweight.iter().sum(), dbias.iter().sum())
        })
        .collect();
    let (mut dweight, mut dbias) = (vec![0.0f64; c], vec![0.0f64; c]);
    for (plane, (w, b)) in per_plane.into_iter().enumerate() {
        dweight[plane % c] += w;
        dbias[plane % c] += b;
    }
    (dweight, dbias)
}

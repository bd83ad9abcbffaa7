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

use super::batch_norm::NormFloat;

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

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::module::{AutodiffModule, Param};
    use burn::tensor::{DType, Tensor, TensorData};

    use super::super::{assert_as_accurate_as_burn, test_values};
    use crate::fixtures::tensor_values;
    use crate::sam2::layer_norm2d::{statistics_dtype, LayerNorm2dConfig, LayerNormConfig};

    type Ad = Autodiff<Flex>;

    /// A tracked `[len]`-shaped (then reshaped) tensor of test values in `dtype`, shifted by
    /// `offset` (a mean far from 0 is where one-pass f32 statistics lose digits).
    fn leaf<const D: usize>(
        shape: [usize; D],
        seed: u64,
        offset: f64,
        dtype: DType,
    ) -> Tensor<Ad, D> {
        let len = shape.iter().product();
        let values: Vec<f64> = test_values(len, seed)
            .iter()
            .map(|v| 2.0 * v + offset)
            .collect();
        Tensor::<Ad, 1>::from_data(TensorData::new(values, [len]), &Default::default())
            .cast(dtype)
            .reshape(shape)
            .require_grad()
    }

    /// `[y, dx, dweight, dbias]` of `norm(x, weight, bias)` under the loss `Σ y · probe`.
    fn results<const D: usize>(
        shape: [usize; D],
        axis: usize,
        dtype: DType,
        norm: impl Fn(Tensor<Ad, D>, Param<Tensor<Ad, 1>>, Param<Tensor<Ad, 1>>) -> Tensor<Ad, D>,
    ) -> [Vec<f64>; 4] {
        let c = shape[axis];
        let x = leaf(shape, 5, 3.0, dtype);
        let weight = leaf([c], 7, 1.0, dtype);
        let bias = leaf([c], 11, 0.0, dtype);
        let probe = leaf(shape, 13, 0.0, dtype).inner();
        let y = norm(
            x.clone(),
            Param::from_tensor(weight.clone()),
            Param::from_tensor(bias.clone()),
        );
        let grads = (y.clone() * Tensor::from_inner(probe)).sum().backward();
        let grad = |t: &Tensor<Ad, D>| tensor_values(t.grad(&grads).expect("tracked"));
        let grad1 = |t: &Tensor<Ad, 1>| tensor_values(t.grad(&grads).expect("tracked"));
        [
            tensor_values(y.inner()),
            grad(&x),
            grad1(&weight),
            grad1(&bias),
        ]
    }

    /// Ours in f64 and f32 against Burn's composition in f64 (values and the three gradients),
    /// as accurate as Burn's composition in f32; `run(dtype, ours)` gives the four results.
    fn compare(what: &str, run: impl Fn(DType, bool) -> [Vec<f64>; 4]) {
        let [exact, ours64, ours32, burn32] = [
            run(DType::F64, false),
            run(DType::F64, true),
            run(DType::F32, true),
            run(DType::F32, false),
        ];
        for (i, part) in ["y", "dx", "dweight", "dbias"].iter().enumerate() {
            assert_as_accurate_as_burn(
                &format!("{what} {part}"),
                [&exact[i], &ours64[i], &ours32[i], &burn32[i]],
            );
        }
    }

    #[test]
    fn last_axis_norm_and_gradients_match_burns_composition() {
        // 393 rows (several tasks and a short one), 37 channels (not a multiple of the lanes).
        let shape = [3, 131, 37];
        let run = |dtype: DType, ours: bool| {
            results(shape, 2, dtype, |x, weight, bias| {
                let mut norm = LayerNormConfig::new(37).init::<Ad>(&Default::default());
                (norm.weight, norm.bias) = (weight, bias);
                if ours {
                    norm.forward(x)
                } else {
                    norm.composed(x, statistics_dtype(dtype))
                }
            })
        };
        compare("LayerNorm", run);
    }

    #[test]
    fn channel_norm_and_gradients_match_burns_composition() {
        // 17·19 pixels: one full piece of PIXELS and a short one per image, three images.
        for shape in [[3, 5, 17, 19], [1, 64, 16, 16]] {
            let c = shape[1];
            let run = |dtype: DType, ours: bool| {
                results(shape, 1, dtype, |x, weight, bias| {
                    let mut norm = LayerNorm2dConfig::new(c).init::<Ad>(&Default::default());
                    (norm.weight, norm.bias) = (weight, bias);
                    if ours {
                        norm.forward(x)
                    } else {
                        norm.composed(x, statistics_dtype(dtype))
                    }
                })
            };
            compare(&format!("LayerNorm2d {shape:?}"), run);
        }
    }

    /// Inference (plain Flex) gives the training forward's bits, on one thread as on many.
    #[test]
    fn inference_matches_training_on_any_number_of_threads() {
        let shape = [2, 7, 23, 13];
        let x = leaf(shape, 17, 0.5, DType::F32);
        let norm = LayerNorm2dConfig::new(7).init::<Ad>(&Default::default());
        let trained = tensor_values(norm.forward(x.clone()).inner());
        let plain = norm.valid();
        let inferred = tensor_values(plain.forward(x.clone().inner()));
        assert_eq!(trained, inferred);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a one-thread pool");
        let single = pool.install(|| tensor_values(plain.forward(x.inner())));
        assert_eq!(single, inferred);
    }
}

//! Batch normalisation in training (batch statistics) and its gradients, on plain row-major
//! slices `[N, C, P]` (P pixels per plane), one channel per task.
//!
//! Forward: `mean_c`, the biased `var_c` over `N·P` values, and
//! `y = (x − mean_c) · weight_c / √(var_c + eps) + bias_c`. Backward, with `x̂ = (x − mean_c) ·
//! inv_std_c` and `M = N·P`: `dbias_c = Σ dy`, `dweight_c = Σ dy · x̂`, and
//! `dx = weight_c · inv_std_c · (dy − dbias_c / M − x̂ · dweight_c / M)`.
//!
//! Why our own: composed from Burn's ops, a training batch norm is some ten passes over the
//! activation forward and backward (the mean, the centred values, their squares, the sums, the
//! scale and shift broadcasts and each of their gradients), each allocating a tensor. Here the
//! forward pass reads the input three times and writes once, the backward pass reads the input
//! and the gradient twice and writes once. The sums run in f64 in a fixed order (so the f32
//! results are deterministic and at least as accurate as the two-level f32 sums they replace).

use rayon::prelude::*;

use crate::float::NormFloat;

/// The `[N, C, P]` shape of the activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormGeometry {
    pub batch: usize,
    pub channels: usize,
    pub plane: usize,
}

impl NormGeometry {
    pub(crate) fn len(&self) -> usize {
        self.batch * self.channels * self.plane
    }

    /// Values per channel.
    fn count(&self) -> usize {
        self.batch * self.plane
    }

    /// The plane of channel `c` in image `n`.
    fn plane_range(&self, n: usize, c: usize) -> std::ops::Range<usize> {
        let start = (n * self.channels + c) * self.plane;
        start..start + self.plane
    }
}

/// What the forward pass computed per channel: the batch mean and the biased variance.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchStatistics {
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
}

impl BatchStatistics {
    fn inv_std(&self, c: usize, eps: f64) -> f64 {
        1.0 / (self.var[c] + eps).sqrt()
    }
}

/// `Σ f(value)` over channel `c`'s planes, in f64, plane after plane.
fn channel_sum<T: NormFloat>(
    values: &[T],
    g: &NormGeometry,
    c: usize,
    f: impl Fn(usize, f64) -> f64,
) -> f64 {
    (0..g.batch)
        .map(|n| {
            let range = g.plane_range(n, c);
            let start = range.start;
            values[range]
                .iter()
                .enumerate()
                .map(|(i, &v)| f(start + i, v.to_f64()))
                .sum::<f64>()
        })
        .sum()
}

/// Runs `task(c, planes)` for every channel in parallel, `planes` being channel `c`'s `[P]`
/// slices of `out`, one per image.
fn for_each_channel<T: NormFloat>(
    out: &mut [T],
    g: &NormGeometry,
    task: impl Fn(usize, &mut [&mut [T]]) + Sync,
) {
    // Split `out` into its planes, then group them by channel: `planes[c][n]`.
    let mut by_channel: Vec<Vec<&mut [T]>> = (0..g.channels).map(|_| Vec::new()).collect();
    for (i, plane) in out.chunks_exact_mut(g.plane.max(1)).enumerate() {
        by_channel[i % g.channels].push(plane);
    }
    by_channel
        .into_par_iter()
        .enumerate()
        .for_each(|(c, mut planes)| task(c, &mut planes));
}

/// `(y, statistics)` of a training batch norm.
///
/// # Panics
/// If the lengths do not match `g` (a caller bug: they come from tensor shapes).
pub fn batch_norm_forward<T: NormFloat>(
    x: &[T],
    weight: &[T],
    bias: &[T],
    eps: f64,
    g: &NormGeometry,
) -> (Vec<T>, BatchStatistics) {
    assert_eq!(x.len(), g.len());
    assert!(weight.len() == g.channels && bias.len() == g.channels);
    let count = g.count().max(1) as f64;
    let (mean, var): (Vec<f64>, Vec<f64>) = (0..g.channels)
        .into_par_iter()
        .map(|c| {
            let mean = channel_sum(x, g, c, |_, v| v) / count;
            let var = channel_sum(x, g, c, |_, v| (v - mean) * (v - mean)) / count;
            (mean, var)
        })
        .unzip();
    let statistics = BatchStatistics { mean, var };
    let mut y = vec![T::default(); x.len()];
    if g.plane > 0 {
        for_each_channel(&mut y, g, |c, planes| {
            let scale = weight[c].to_f64() * statistics.inv_std(c, eps);
            let (mean, shift) = (statistics.mean[c], bias[c].to_f64());
            for (n, out) in planes.iter_mut().enumerate() {
                let input = &x[g.plane_range(n, c)];
                for (o, &v) in out.iter_mut().zip(input) {
                    *o = T::from_f64((v.to_f64() - mean) * scale + shift);
                }
            }
        });
    }
    (y, statistics)
}

/// `(dx, dweight, dbias)` of [`batch_norm_forward`] given `dy` and the statistics it returned.
///
/// # Panics
/// If the lengths do not match `g`.
pub fn batch_norm_backward<T: NormFloat>(
    x: &[T],
    weight: &[T],
    statistics: &BatchStatistics,
    eps: f64,
    output_grad: &[T],
    g: &NormGeometry,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    assert!(x.len() == g.len() && output_grad.len() == g.len());
    assert_eq!(weight.len(), g.channels);
    let count = g.count().max(1) as f64;
    // Per channel: Σ dy and Σ dy · x̂.
    let (dbias, dweight): (Vec<f64>, Vec<f64>) = (0..g.channels)
        .into_par_iter()
        .map(|c| {
            let (mean, inv_std) = (statistics.mean[c], statistics.inv_std(c, eps));
            let dbias = channel_sum(output_grad, g, c, |_, dy| dy);
            let dweight = channel_sum(output_grad, g, c, |i, dy| {
                dy * (x[i].to_f64() - mean) * inv_std
            });
            (dbias, dweight)
        })
        .unzip();
    let mut dx = vec![T::default(); x.len()];
    if g.plane > 0 {
        for_each_channel(&mut dx, g, |c, planes| {
            let (mean, inv_std) = (statistics.mean[c], statistics.inv_std(c, eps));
            let scale = weight[c].to_f64() * inv_std;
            let (mean_dy, mean_dy_xhat) = (dbias[c] / count, dweight[c] / count);
            for (n, out) in planes.iter_mut().enumerate() {
                let range = g.plane_range(n, c);
                let (input, dy) = (&x[range.clone()], &output_grad[range]);
                for ((o, &v), &d) in out.iter_mut().zip(input).zip(dy) {
                    let x_hat = (v.to_f64() - mean) * inv_std;
                    *o = T::from_f64(scale * (d.to_f64() - mean_dy - x_hat * mean_dy_xhat));
                }
            }
        });
    }
    let narrow = |values: Vec<f64>| values.into_iter().map(T::from_f64).collect();
    (dx, narrow(dweight), narrow(dbias))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::test_values as values;

    /// The batch norm and its gradients by the definition (f64, no shared code), with the
    /// gradient of `Σ y · r` computed by central differences of the forward definition.
    fn forward_by_definition(
        x: &[f64],
        w: &[f64],
        b: &[f64],
        eps: f64,
        g: &NormGeometry,
    ) -> Vec<f64> {
        let mut y = vec![0.0; x.len()];
        for c in 0..g.channels {
            let idx: Vec<usize> = (0..g.batch).flat_map(|n| g.plane_range(n, c)).collect();
            let m = idx.iter().map(|&i| x[i]).sum::<f64>() / idx.len() as f64;
            let v = idx.iter().map(|&i| (x[i] - m).powi(2)).sum::<f64>() / idx.len() as f64;
            for &i in &idx {
                y[i] = (x[i] - m) / (v + eps).sqrt() * w[c] + b[c];
            }
        }
        y
    }

    #[test]
    fn matches_the_definition_and_its_numerical_gradient() {
        let g = NormGeometry {
            batch: 2,
            channels: 3,
            plane: 5,
        };
        let eps = 1e-5;
        let x: Vec<f64> = values(g.len(), 1).iter().map(|v| 2.0 * v + 0.5).collect();
        let w: Vec<f64> = values(3, 2).iter().map(|v| v + 1.5).collect();
        let b = values(3, 3);
        let r = values(g.len(), 4);
        let (y, stats) = batch_norm_forward(&x, &w, &b, eps, &g);
        let want = forward_by_definition(&x, &w, &b, eps, &g);
        for (a, e) in y.iter().zip(&want) {
            assert!((a - e).abs() < 1e-12, "{a} vs {e}");
        }
        let (dx, dw, db) = batch_norm_backward(&x, &w, &stats, eps, &r, &g);
        let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
            forward_by_definition(x, w, b, eps, &g)
                .iter()
                .zip(&r)
                .map(|(y, r)| y * r)
                .sum()
        };
        let h = 1e-6;
        let numeric = |which: usize, i: usize| {
            let mut args = [x.clone(), w.clone(), b.clone()];
            args[which][i] += h;
            let up = loss(&args[0], &args[1], &args[2]);
            args[which][i] -= 2.0 * h;
            let down = loss(&args[0], &args[1], &args[2]);
            (up - down) / (2.0 * h)
        };
        for (which, got) in [(0, &dx), (1, &dw), (2, &db)] {
            for (i, &a) in got.iter().enumerate() {
                let e = numeric(which, i);
                assert!(
                    (a - e).abs() < 1e-6 * (1.0 + e.abs()),
                    "grad {which}[{i}]: {a} vs {e}"
                );
            }
        }
    }
}

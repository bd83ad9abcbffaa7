//! The log-probability of each pixel's target class, `log_softmax(x, dim=1)` gathered at the
//! target, and its gradient, on plain row-major slices: `x` is `[N, C, P]` (P pixels per image),
//! `classes` one class per pixel (`[N, P]`).
//!
//! `out[n, p] = x[n, y, p] − lse[n, p]` with `lse[n, p] = ln Σ_c exp(x[n, c, p])`, and
//! `dL/dx[n, c, p] = g[n, p] · (1{c = y} − exp(x[n, c, p] − lse[n, p]))`. As in Burn's
//! `log_softmax`, the caller shifts `x` by a per-pixel constant first so that `exp` cannot
//! overflow (log-softmax does not change under the shift).
//!
//! Why our own: composed from Burn's ops (`exp`, `sum_dim(1)`, `log`, `gather`, a subtraction)
//! the forward pass keeps `exp(x)` besides `x`, and the backward pass of the class sum
//! broadcasts an `[N, 1, H, W]` gradient over `[N, C, H, W]`, which Flex does element by
//! element through strided indices; the gather's backward is a scatter. Here both passes read
//! each class plane in order, in parallel over blocks of pixels, and only `lse` (one value per
//! pixel) is kept.

use std::ops::{Add, Mul, Sub};

use rayon::prelude::*;

/// The float types the kernels compute in.
pub trait SoftmaxFloat:
    Copy
    + Default
    + Send
    + Sync
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + 'static
{
    const ONE: Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
}

impl SoftmaxFloat for f32 {
    const ONE: Self = 1.0;
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn ln(self) -> Self {
        f32::ln(self)
    }
}

impl SoftmaxFloat for f64 {
    const ONE: Self = 1.0;
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn ln(self) -> Self {
        f64::ln(self)
    }
}

/// The shape `[N, C, P]` of the logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassPlanes {
    pub batch: usize,
    pub classes: usize,
    pub pixels: usize,
}

/// Pixels one task handles: its `lse` block and the matching run of every class plane.
const BLOCK: usize = 4096;

impl ClassPlanes {
    /// Whether `x` and `classes` have this shape and every class is in range.
    pub fn fits<T>(&self, x: &[T], classes: &[usize]) -> bool {
        x.len() == self.batch * self.classes * self.pixels
            && classes.len() == self.batch * self.pixels
            && classes.iter().all(|&class| class < self.classes)
    }

    /// Calls `task(image, first pixel, block of outputs)` for blocks of [`BLOCK`] pixels of
    /// every image, in parallel; `out` is `[N, P]`.
    fn for_each_block<T: Send>(&self, out: &mut [T], task: impl Fn(usize, usize, &mut [T]) + Sync) {
        let pixels = self.pixels.max(1);
        out.par_chunks_mut(pixels)
            .enumerate()
            .for_each(|(image, row)| {
                row.par_chunks_mut(BLOCK)
                    .enumerate()
                    .for_each(|(block, values)| task(image, block * BLOCK, values));
            });
    }
}

/// `(out, lse)`, both `[N, P]`: the target class's log-probability per pixel and the log-sum-exp
/// over the classes it subtracts.
///
/// # Panics
/// If the lengths do not match `planes` or a class is out of range (a caller bug: the dispatch
/// checks [`ClassPlanes::fits`] first).
pub fn class_log_probs<T: SoftmaxFloat>(
    x: &[T],
    classes: &[usize],
    planes: &ClassPlanes,
) -> (Vec<T>, Vec<T>) {
    assert!(planes.fits(x, classes), "{planes:?}");
    let (c, p) = (planes.classes, planes.pixels);
    let mut lse = vec![T::default(); planes.batch * p];
    planes.for_each_block(&mut lse, |image, first, sums| {
        let pixels = first..first + sums.len();
        for class in 0..c {
            let plane = &x[(image * c + class) * p..][pixels.clone()];
            for (sum, &value) in sums.iter_mut().zip(plane) {
                *sum = *sum + value.exp();
            }
        }
        for sum in sums.iter_mut() {
            *sum = sum.ln();
        }
    });
    let out = (0..planes.batch * p)
        .into_par_iter()
        .with_min_len(BLOCK)
        .map(|i| {
            let (image, pixel) = (i / p, i % p);
            x[(image * c + classes[i]) * p + pixel] - lse[i]
        })
        .collect();
    (out, lse)
}

/// `dL/dx` (`[N, C, P]`) of [`class_log_probs`] given `dL/dout` (`[N, P]`) and the `lse` the
/// forward pass returned.
///
/// # Panics
/// If the lengths do not match `planes` or a class is out of range.
pub fn class_log_probs_grad<T: SoftmaxFloat>(
    x: &[T],
    classes: &[usize],
    lse: &[T],
    output_grad: &[T],
    planes: &ClassPlanes,
) -> Vec<T> {
    assert!(planes.fits(x, classes), "{planes:?}");
    let (c, p) = (planes.classes, planes.pixels);
    assert_eq!(lse.len(), planes.batch * p);
    assert_eq!(output_grad.len(), planes.batch * p);
    let mut grad = vec![T::default(); x.len()];
    // One task per (image, class) plane block: planes are disjoint runs of `grad`.
    grad.par_chunks_mut(p.max(1))
        .enumerate()
        .for_each(|(plane, dx)| {
            let (image, class) = (plane / c, plane % c);
            let rows = image * p..(image + 1) * p;
            let (x, lse, g) = (
                &x[plane * p..][..p],
                &lse[rows.clone()],
                &output_grad[rows.clone()],
            );
            let targets = &classes[rows];
            dx.par_chunks_mut(BLOCK)
                .enumerate()
                .for_each(|(block, dx)| {
                    let at = block * BLOCK..block * BLOCK + dx.len();
                    let (x, lse, g, targets) = (
                        &x[at.clone()],
                        &lse[at.clone()],
                        &g[at.clone()],
                        &targets[at],
                    );
                    for i in 0..dx.len() {
                        let softmax = (x[i] - lse[i]).exp();
                        let hit = if targets[i] == class {
                            T::ONE
                        } else {
                            T::default()
                        };
                        dx[i] = g[i] * (hit - softmax);
                    }
                });
        });
    grad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::test_values as values;

    /// The definition, per pixel, in f64 (independent of the kernels; the test's logits lie in
    /// [-6, 2), so `exp` needs no shift, and a NaN would reach the result).
    fn by_definition(
        x: &[f64],
        classes: &[usize],
        g: &[f64],
        planes: &ClassPlanes,
    ) -> [Vec<f64>; 2] {
        let (n, c, p) = (planes.batch, planes.classes, planes.pixels);
        let mut out = vec![0.0; n * p];
        let mut dx = vec![0.0; n * c * p];
        for image in 0..n {
            for pixel in 0..p {
                let at = |class: usize| (image * c + class) * p + pixel;
                let lse = (0..c).map(|k| x[at(k)].exp()).sum::<f64>().ln();
                let i = image * p + pixel;
                out[i] = x[at(classes[i])] - lse;
                for k in 0..c {
                    let hit = if k == classes[i] { 1.0 } else { 0.0 };
                    dx[at(k)] = g[i] * (hit - (x[at(k)] - lse).exp());
                }
            }
        }
        [out, dx]
    }

    #[test]
    fn matches_the_definition() {
        // One class, odd sizes, several blocks of pixels.
        for planes in [
            ClassPlanes {
                batch: 2,
                classes: 3,
                pixels: 7,
            },
            ClassPlanes {
                batch: 1,
                classes: 1,
                pixels: 5,
            },
            ClassPlanes {
                batch: 3,
                classes: 19,
                pixels: 2 * BLOCK + 37,
            },
        ] {
            let (n, c, p) = (planes.batch, planes.classes, planes.pixels);
            let x: Vec<f64> = values(n * c * p, 3).iter().map(|v| 4.0 * v - 2.0).collect();
            let classes: Vec<usize> = (0..n * p).map(|i| (i * 7 + i / 3) % c).collect();
            let g = values(n * p, 5);
            let [want_out, want_dx] = by_definition(&x, &classes, &g, &planes);
            let (out, lse) = class_log_probs(&x, &classes, &planes);
            let dx = class_log_probs_grad(&x, &classes, &lse, &g, &planes);
            for (got, want) in [(&out, &want_out), (&dx, &want_dx)] {
                assert_eq!(got.len(), want.len());
                for (a, b) in got.iter().zip(want.iter()) {
                    assert!(
                        (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                        "{planes:?}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn out_of_range_classes_do_not_fit() {
        let planes = ClassPlanes {
            batch: 1,
            classes: 3,
            pixels: 2,
        };
        assert!(planes.fits(&[0.0f32; 6], &[0, 2]));
        assert!(!planes.fits(&[0.0f32; 6], &[0, 3]));
        assert!(!planes.fits(&[0.0f32; 5], &[0, 2]));
    }
}

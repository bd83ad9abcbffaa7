//! The per-mask sums of SAM2's mask losses and their gradient, on plain row-major slices:
//! mask logits `x` are `[N, M, L]` (M masks of L pixels per object), targets `t` are `[N, L]`
//! (one target per object, shared by its masks).
//!
//! For each row `(n, m)` the forward pass returns six sums ([`MASK_LOSS_SUMS`]): the sigmoid
//! focal loss `Σ ce · (1 − p_t)^γ · α_t` (with `p = σ(x)`, `ce` the BCE with logits, `p_t = p t +
//! (1 − p)(1 − t)`, `α_t = α t + (1 − α)(1 − t)`, or 1 when `α < 0`), the dice terms `Σ p t` and
//! `Σ p`, the target area `Σ t`, and the IoU counts `|x > 0 ∧ t > 0|` and `|x > 0 ∨ t > 0|`. Only
//! the first three depend smoothly on `x`; the gradient pass takes `dL/dsums` and returns
//! `dL/dx = g₀ · ∂focal/∂x + (g₁ t + g₂) · p (1 − p)`, with
//! `∂focal/∂x = α_t ((p − t)(1 − p_t)^γ − ce · γ (1 − p_t)^(γ−1) · p (1 − p)(2t − 1))`.
//!
//! Why our own: composed from Burn's ops the focal, dice and IoU terms are some twenty
//! element-wise passes over the `[N, M, H, W]` masks, each allocating a tensor, and as many
//! again backward (74 ms forward for the SAM2 bench's 4×3×256×256). Here each direction is
//! one pass. Each pixel's arithmetic runs in f64 whatever the input type, with our own
//! branch-free `exp` and `ln(1 + e)` (`vector_math::exp_nonpositive`, [`ln_1p_unit`]) so that the compiler
//! runs it in SIMD registers: glibc's scalar `expf` and `ln` (the first version of this kernel)
//! were 11 % of a SAM2 head training step. The sums are kept in [`LANES`] f64 accumulators per
//! block of fixed size and added in a fixed order, so results depend neither on the number of
//! threads nor on the SIMD width.

use burn::tensor::activation::sigmoid;
use burn::tensor::{backend::Backend, Bool, Tensor};
use rayon::prelude::*;

use super::batch_norm::NormFloat;
use super::vector_math::{exp_nonpositive, has_avx2, has_avx512};

/// Number of sums per row: focal, `Σ p t`, `Σ p`, `Σ t`, intersection, union.
pub const MASK_LOSS_SUMS: usize = 6;

/// Pixels one task handles.
const BLOCK: usize = 8192;

/// Independent accumulators per sum in the forward pass: pixel `i` of a group of `LANES` adds
/// into lane `i`, so the compiler can run a group's pixels side by side without reordering an
/// addition; the lanes are added in order at the end of the block.
const LANES: usize = 8;

/// The sigmoid focal loss's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Focal {
    /// Weight of the positive class; negative: no class weighting.
    pub alpha: f64,
    /// Focusing exponent; 0 gives plain BCE.
    pub gamma: f64,
}

/// The shape `[N, M, L]` of the mask logits, and the focal loss they are scored with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaskRows {
    pub objects: usize,
    pub masks: usize,
    pub pixels: usize,
    pub focal: Focal,
}

impl MaskRows {
    /// Whether the logits and targets have this shape.
    pub fn fits<T>(&self, logits: &[T], targets: &[T]) -> bool {
        logits.len() == self.objects * self.masks * self.pixels
            && targets.len() == self.objects * self.pixels
    }

    /// The target row of logit row `row`.
    fn target_row<'a, T>(&self, targets: &'a [T], row: usize) -> &'a [T] {
        let object = row / self.masks.max(1);
        &targets[object * self.pixels..(object + 1) * self.pixels]
    }
}

/// `ln(1 + e)` for `e` in `[0, 1]`, in f64 and without branches or calls.
///
/// `ln y = 2 atanh(s)` with `s = (y − 1) / (y + 1)`, where `y = 1 + e`, or `y = (1 + e) / 2`
/// plus `ln 2` above `e = √2 − 1`; then `|s| ≤ 0.172` and the odd series to `s^17` leaves
/// under 1e-15 of the result (with rounding, 1.1e-15 relative at worst, measured). `y ± 1` are formed from `e` directly, so nothing cancels.
#[inline(always)]
fn ln_1p_unit(e: f64) -> f64 {
    let upper = e > std::f64::consts::SQRT_2 - 1.0;
    let (num, den, offset) = if upper {
        (e - 1.0, e + 3.0, std::f64::consts::LN_2)
    } else {
        (e, e + 2.0, 0.0)
    };
    let s = num / den;
    let z = s * s;
    // 2 (1 + z/3 + z²/5 + … + z⁸/17), by Horner from the last term.
    let mut series = 2.0 / 17.0;
    for k in (0..8).rev() {
        series = series * z + 2.0 / f64::from(2 * k + 1);
    }
    offset + s * series
}

/// The focal modulation `(1 − p_t)^γ` and its slope in `1 − p_t`, `γ (1 − p_t)^(γ−1)`: one
/// type per case, so that each loop is compiled for its own (only the general case calls
/// `powf`).
trait Modulation: Copy {
    fn at(self, q: f64) -> (f64, f64);
}

/// `γ = 0`: plain BCE.
#[derive(Clone, Copy)]
struct Unmodulated;

impl Modulation for Unmodulated {
    #[inline(always)]
    fn at(self, _: f64) -> (f64, f64) {
        (1.0, 0.0)
    }
}

/// `γ = 2`, SAM2's setting.
#[derive(Clone, Copy)]
struct Squared;

impl Modulation for Squared {
    #[inline(always)]
    fn at(self, q: f64) -> (f64, f64) {
        (q * q, 2.0 * q)
    }
}

/// Any other `γ`.
#[derive(Clone, Copy)]
struct Power(f64);

impl Modulation for Power {
    #[inline(always)]
    fn at(self, q: f64) -> (f64, f64) {
        (q.powf(self.0), self.0 * q.powf(self.0 - 1.0))
    }
}

/// `α_t = α t + (1 − α)(1 − t)` as `(α, 1 − α)`; `(1, 1)` when `α < 0` (no weighting).
fn class_weights(alpha: f64) -> (f64, f64) {
    if alpha >= 0.0 {
        (alpha, 1.0 - alpha)
    } else {
        (1.0, 1.0)
    }
}

/// What the forward and the gradient pass need of one pixel.
struct Pixel {
    /// `σ(x)`.
    p: f64,
    /// `p (1 − p)`, the derivative of `σ`.
    slope: f64,
    /// The focal loss.
    focal: f64,
    /// Its derivative in `x`.
    focal_slope: f64,
}

#[inline(always)]
fn pixel(
    x: f64,
    t: f64,
    (alpha, one_minus_alpha): (f64, f64),
    modulation: impl Modulation,
) -> Pixel {
    // e^(−|x|) never overflows; σ(x), 1 − σ(x) and the BCE follow from it without cancellation.
    let e = exp_nonpositive(-x.abs());
    let inverse = 1.0 / (1.0 + e);
    let (p, p_complement) = if x < 0.0 {
        (e * inverse, inverse)
    } else {
        (inverse, e * inverse)
    };
    let slope = p * p_complement;
    let ce = if x > 0.0 { x } else { 0.0 } - x * t + ln_1p_unit(e);
    let alpha_t = t * alpha + (1.0 - t) * one_minus_alpha;
    // q = 1 − p_t, written so that nothing cancels where p_t is close to 1.
    let q = p_complement * t + p * (1.0 - t);
    let (modulation, modulation_slope) = modulation.at(q);
    // d(1 − p_t)/dx = −p (1 − p)(2t − 1); d ce/dx = p − t.
    Pixel {
        p,
        slope,
        focal: ce * modulation * alpha_t,
        focal_slope: alpha_t
            * ((p - t) * modulation - ce * modulation_slope * slope * (2.0 * t - 1.0)),
    }
}

/// Adds pixel `(x, t)` to lane `lane` of the six sums.
#[inline(always)]
fn add_pixel<T: NormFloat>(
    lanes: &mut [[f64; LANES]; MASK_LOSS_SUMS],
    lane: usize,
    x: T,
    t: T,
    weights: (f64, f64),
    modulation: impl Modulation,
) {
    let (x, t) = (x.to_f64(), t.to_f64());
    let px = pixel(x, t, weights, modulation);
    let (predicted, truth) = (x > 0.0, t > 0.0);
    lanes[0][lane] += px.focal;
    lanes[1][lane] += px.p * t;
    lanes[2][lane] += px.p;
    lanes[3][lane] += t;
    lanes[4][lane] += f64::from(u8::from(predicted && truth));
    lanes[5][lane] += f64::from(u8::from(predicted || truth));
}

/// The six sums of one block of one row.
#[inline(always)]
fn block_sums<T: NormFloat>(
    x: &[T],
    t: &[T],
    weights: (f64, f64),
    modulation: impl Modulation,
) -> [f64; MASK_LOSS_SUMS] {
    let mut lanes = [[0.0f64; LANES]; MASK_LOSS_SUMS];
    let (x_groups, x_rest) = x.as_chunks::<LANES>();
    let (t_groups, t_rest) = t.as_chunks::<LANES>();
    for (xs, ts) in x_groups.iter().zip(t_groups) {
        for lane in 0..LANES {
            add_pixel(&mut lanes, lane, xs[lane], ts[lane], weights, modulation);
        }
    }
    for (lane, (&x, &t)) in x_rest.iter().zip(t_rest).enumerate() {
        add_pixel(&mut lanes, lane, x, t, weights, modulation);
    }
    lanes.map(|sums| sums.iter().sum())
}

/// `dL/dx` over one block of one row, given `dL/d(focal, Σ p t, Σ p)`.
#[inline(always)]
fn block_grad<T: NormFloat>(
    dx: &mut [T],
    x: &[T],
    t: &[T],
    [g_focal, g_pt, g_p]: [f64; 3],
    weights: (f64, f64),
    modulation: impl Modulation,
) {
    for ((dx, &x), &t) in dx.iter_mut().zip(x).zip(t) {
        let (x, t) = (x.to_f64(), t.to_f64());
        let px = pixel(x, t, weights, modulation);
        *dx = T::from_f64(g_focal * px.focal_slope + (g_pt * t + g_p) * px.slope);
    }
}

/// [`block_sums`] compiled with AVX2 (four f64 per register; the default x86-64 target has
/// two).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_sums_avx2<T: NormFloat>(
    x: &[T],
    t: &[T],
    weights: (f64, f64),
    modulation: impl Modulation,
) -> [f64; MASK_LOSS_SUMS] {
    block_sums(x, t, weights, modulation)
}

/// [`block_sums`] compiled with AVX-512 (eight f64 per register: one of the sums' lanes).
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_sums_avx512<T: NormFloat>(
    x: &[T],
    t: &[T],
    weights: (f64, f64),
    modulation: impl Modulation,
) -> [f64; MASK_LOSS_SUMS] {
    block_sums(x, t, weights, modulation)
}

/// [`block_grad`] compiled with AVX-512.
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_grad_avx512<T: NormFloat>(
    dx: &mut [T],
    x: &[T],
    t: &[T],
    sums_grad: [f64; 3],
    weights: (f64, f64),
    modulation: impl Modulation,
) {
    block_grad(dx, x, t, sums_grad, weights, modulation)
}

/// [`block_grad`] compiled with AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_grad_avx2<T: NormFloat>(
    dx: &mut [T],
    x: &[T],
    t: &[T],
    sums_grad: [f64; 3],
    weights: (f64, f64),
    modulation: impl Modulation,
) {
    block_grad(dx, x, t, sums_grad, weights, modulation)
}

/// `[N, M, 6]`: the sums of [`MASK_LOSS_SUMS`] per row.
///
/// # Panics
/// If the lengths do not match `rows` (a caller bug: the dispatch checks [`MaskRows::fits`]).
pub fn mask_loss_sums<T: NormFloat>(logits: &[T], targets: &[T], rows: &MaskRows) -> Vec<T> {
    let gamma = rows.focal.gamma;
    if gamma == 0.0 {
        sums_with(logits, targets, rows, Unmodulated)
    } else if gamma == 2.0 {
        sums_with(logits, targets, rows, Squared)
    } else {
        sums_with(logits, targets, rows, Power(gamma))
    }
}

fn sums_with<T: NormFloat>(
    logits: &[T],
    targets: &[T],
    rows: &MaskRows,
    modulation: impl Modulation + Send + Sync,
) -> Vec<T> {
    assert!(rows.fits(logits, targets), "{rows:?}");
    let l = rows.pixels;
    let blocks_per_row = l.div_ceil(BLOCK).max(1);
    let row_count = rows.objects * rows.masks;
    let weights = class_weights(rows.focal.alpha);
    let (avx512, avx2) = (has_avx512(), has_avx2());
    let partial: Vec<[f64; MASK_LOSS_SUMS]> = (0..row_count * blocks_per_row)
        .into_par_iter()
        .map(|task| {
            let (row, block) = (task / blocks_per_row, task % blocks_per_row);
            let at = block * BLOCK..((block + 1) * BLOCK).min(l);
            let x = &logits[row * l..][at.clone()];
            let t = &rows.target_row(targets, row)[at];
            #[cfg(target_arch = "x86_64")]
            if avx512 {
                // SAFETY: `has_avx512` found AVX-512F on this CPU.
                return unsafe { block_sums_avx512(x, t, weights, modulation) };
            } else if avx2 {
                // SAFETY: `has_avx2` found AVX2 on this CPU.
                return unsafe { block_sums_avx2(x, t, weights, modulation) };
            }
            let _ = (avx512, avx2);
            block_sums(x, t, weights, modulation)
        })
        .collect();
    partial
        .chunks(blocks_per_row)
        .flat_map(|blocks| {
            let mut row = [0.0f64; MASK_LOSS_SUMS];
            for block in blocks {
                for (total, value) in row.iter_mut().zip(block) {
                    *total += value;
                }
            }
            row.map(T::from_f64)
        })
        .collect()
}

/// `dL/dlogits` (`[N, M, L]`) of [`mask_loss_sums`] given `dL/dsums` (`[N, M, 6]`; the counts'
/// gradients are ignored, their derivative is zero).
///
/// # Panics
/// If the lengths do not match `rows`.
pub fn mask_loss_sums_grad<T: NormFloat>(
    logits: &[T],
    targets: &[T],
    sums_grad: &[T],
    rows: &MaskRows,
) -> Vec<T> {
    let gamma = rows.focal.gamma;
    if gamma == 0.0 {
        grad_with(logits, targets, sums_grad, rows, Unmodulated)
    } else if gamma == 2.0 {
        grad_with(logits, targets, sums_grad, rows, Squared)
    } else {
        grad_with(logits, targets, sums_grad, rows, Power(gamma))
    }
}

fn grad_with<T: NormFloat>(
    logits: &[T],
    targets: &[T],
    sums_grad: &[T],
    rows: &MaskRows,
    modulation: impl Modulation + Send + Sync,
) -> Vec<T> {
    assert!(rows.fits(logits, targets), "{rows:?}");
    let l = rows.pixels.max(1);
    assert_eq!(sums_grad.len(), rows.objects * rows.masks * MASK_LOSS_SUMS);
    let weights = class_weights(rows.focal.alpha);
    let (avx512, avx2) = (has_avx512(), has_avx2());
    let mut grad = vec![T::default(); logits.len()];
    grad.par_chunks_mut(l).enumerate().for_each(|(row, dx)| {
        let g = &sums_grad[row * MASK_LOSS_SUMS..][..3];
        let g = [g[0], g[1], g[2]].map(T::to_f64);
        let x = &logits[row * l..][..l];
        let t = rows.target_row(targets, row);
        dx.par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(block, dx)| {
                let at = block * BLOCK..block * BLOCK + dx.len();
                let (x, t) = (&x[at.clone()], &t[at]);
                #[cfg(target_arch = "x86_64")]
                if avx512 {
                    // SAFETY: `has_avx512` found AVX-512F on this CPU.
                    return unsafe { block_grad_avx512(dx, x, t, g, weights, modulation) };
                } else if avx2 {
                    // SAFETY: `has_avx2` found AVX2 on this CPU.
                    return unsafe { block_grad_avx2(dx, x, t, g, weights, modulation) };
                }
                let _ = (avx512, avx2);
                block_grad(dx, x, t, g, weights, modulation)
            });
    });
    grad
}

/// [`mask_loss_sums`] composed of Burn's ops, with Burn's gradients: what every backend but
/// CPU f32/f64 computes, and the reference of the kernels' parity tests. `logits` `[N, M, L]`,
/// `targets` `[N, L]` -> `[N, M, 6]`.
pub fn mask_loss_sums_by_burn<B: Backend>(
    logits: Tensor<B, 3>,
    targets: Tensor<B, 2>,
    Focal { alpha, gamma }: Focal,
) -> Tensor<B, 3> {
    let [n, m, l] = logits.dims();
    // A real copy, not a broadcast view: Flex's element-wise ops on stride-0 operands are
    // several times slower, and every term reads the targets.
    let t = targets.reshape([n, 1, l]).repeat_dim(1, m);
    let p = sigmoid(logits.clone());
    // The overflow-free form of BCE-with-logits that PyTorch uses.
    let ce = logits.clone().clamp_min(0.0) - logits.clone() * t.clone()
        + logits.clone().abs().neg().exp().log1p();
    let mut focal = if gamma == 0.0 {
        // torch's `x ** 0` is 1 with a zero gradient; skip it rather than differentiate 0^0.
        ce
    } else {
        let p_t = p.clone() * t.clone() + (p.clone().neg() + 1.0) * (t.clone().neg() + 1.0);
        ce * (p_t.neg() + 1.0).powf_scalar(gamma)
    };
    if alpha >= 0.0 {
        focal = focal * (t.clone() * alpha + (t.clone().neg() + 1.0) * (1.0 - alpha));
    }
    let dtype = logits.dtype();
    let count = |mask: Tensor<B, 3, Bool>| mask.float().cast(dtype).sum_dim(2);
    let predicted = logits.greater_elem(0.0);
    let truth = t.clone().greater_elem(0.0);
    Tensor::cat(
        vec![
            focal.sum_dim(2),
            (p.clone() * t.clone()).sum_dim(2),
            p.sum_dim(2),
            t.sum_dim(2),
            count(predicted.clone().bool_and(truth.clone())),
            count(predicted.bool_or(truth)),
        ],
        2,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::kernels::test_values as values;

    /// The definition in f64, written out as the reference writes it (sigmoid, BCE with logits,
    /// the focal modulation), and its derivative by central differences of the definition.
    fn focal_by_definition(x: f64, t: f64, alpha: f64, gamma: f64) -> f64 {
        let p = 1.0 / (1.0 + (-x).exp());
        let ce = x.max(0.0) - x * t + (-x.abs()).exp().ln_1p();
        let p_t = p * t + (1.0 - p) * (1.0 - t);
        let alpha_t = if alpha >= 0.0 {
            alpha * t + (1.0 - alpha) * (1.0 - t)
        } else {
            1.0
        };
        ce * (1.0 - p_t).powf(gamma) * alpha_t
    }

    #[test]
    fn sums_and_gradient_match_the_definition() {
        for (objects, masks, pixels, alpha, gamma) in [
            (2, 3, 7, 0.25, 2.0),
            (1, 1, 1, -1.0, 0.0),
            (3, 2, 2 * BLOCK + 5, 0.5, 1.5),
        ] {
            let rows = MaskRows {
                objects,
                masks,
                pixels,
                focal: Focal { alpha, gamma },
            };
            let logits: Vec<f64> = values(objects * masks * pixels, 11)
                .iter()
                .map(|v| 12.0 * v)
                .collect();
            // Binary targets, and a soft one where there is room for it.
            let targets: Vec<f64> = values(objects * pixels, 13)
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    if i % 5 == 4 {
                        0.3
                    } else {
                        f64::from(u8::from(*v > 0.2))
                    }
                })
                .collect();
            let sums_grad = values(objects * masks * MASK_LOSS_SUMS, 17);
            let sums = mask_loss_sums(&logits, &targets, &rows);
            let grad = mask_loss_sums_grad(&logits, &targets, &sums_grad, &rows);
            for row in 0..objects * masks {
                let t_row = &targets[(row / masks) * pixels..][..pixels];
                let x_row = &logits[row * pixels..][..pixels];
                let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
                let want = [
                    x_row
                        .iter()
                        .zip(t_row)
                        .map(|(&x, &t)| focal_by_definition(x, t, alpha, gamma))
                        .sum(),
                    x_row.iter().zip(t_row).map(|(&x, &t)| sigmoid(x) * t).sum(),
                    x_row.iter().map(|&x| sigmoid(x)).sum(),
                    t_row.iter().sum(),
                    x_row
                        .iter()
                        .zip(t_row)
                        .filter(|(&x, &t)| x > 0.0 && t > 0.0)
                        .count() as f64,
                    x_row
                        .iter()
                        .zip(t_row)
                        .filter(|(&x, &t)| x > 0.0 || t > 0.0)
                        .count() as f64,
                ];
                for (k, (&got, want)) in sums[row * MASK_LOSS_SUMS..][..MASK_LOSS_SUMS]
                    .iter()
                    .zip(want)
                    .enumerate()
                {
                    assert!(
                        (got - want).abs() <= 1e-9 * (1.0 + want.abs()),
                        "{rows:?} row {row} sum {k}: {got} vs {want}"
                    );
                }
                let g = &sums_grad[row * MASK_LOSS_SUMS..];
                for i in 0..pixels {
                    let (x, t) = (x_row[i], t_row[i]);
                    let h = 1e-5;
                    let focal_slope = (focal_by_definition(x + h, t, alpha, gamma)
                        - focal_by_definition(x - h, t, alpha, gamma))
                        / (2.0 * h);
                    let p = sigmoid(x);
                    let want = g[0] * focal_slope + (g[1] * t + g[2]) * p * (1.0 - p);
                    let got = grad[row * pixels + i];
                    assert!(
                        (got - want).abs() <= 1e-7 * (1.0 + want.abs()),
                        "{rows:?} row {row} pixel {i} (x {x}, t {t}): {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn ln_1p_matches_the_standard_library() {
        let mut worst = 0.0f64;
        for i in 1..=200_000 {
            let e = f64::from(i) / 200_000.0;
            worst = worst.max(((ln_1p_unit(e) - e.ln_1p()) / e.ln_1p()).abs());
        }
        // The series' truncation is under 1e-15; its rounding adds a few ulp (1.1e-15 measured).
        assert!(worst <= 2e-15, "{worst:e}");
        assert_eq!(ln_1p_unit(0.0), 0.0);
    }

    /// The AVX2 and AVX-512 builds of the pixel code against the portable build, for each
    /// modulation, where the CPU has them.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_builds_give_the_same_bits() {
        let x: Vec<f32> = values(3 * LANES + 5, 41)
            .iter()
            .map(|v| (9.0 * v) as f32)
            .collect();
        let t: Vec<f32> = values(x.len(), 43)
            .iter()
            .map(|v| f32::from(u8::from(*v > 0.0)))
            .collect();
        let weights = class_weights(0.25);
        let sums_grad = [0.5, -1.0, 2.0];
        fn compare(x: &[f32], t: &[f32], weights: (f64, f64), g: [f64; 3], m: impl Modulation) {
            let sums = block_sums(x, t, weights, m);
            let mut grad = vec![0.0f32; x.len()];
            block_grad(&mut grad, x, t, g, weights, m);
            let mut built = vec![0.0f32; x.len()];
            if has_avx2() {
                // SAFETY: the CPU has AVX2 (checked).
                assert_eq!(unsafe { block_sums_avx2(x, t, weights, m) }, sums);
                // SAFETY: as above.
                unsafe { block_grad_avx2(&mut built, x, t, g, weights, m) };
                assert_eq!(built, grad);
            }
            if has_avx512() {
                // SAFETY: the CPU has AVX-512F (checked).
                assert_eq!(unsafe { block_sums_avx512(x, t, weights, m) }, sums);
                // SAFETY: as above.
                unsafe { block_grad_avx512(&mut built, x, t, g, weights, m) };
                assert_eq!(built, grad);
            }
        }
        compare(&x, &t, weights, sums_grad, Unmodulated);
        compare(&x, &t, weights, sums_grad, Squared);
        compare(&x, &t, weights, sums_grad, Power(1.5));
    }

    #[test]
    fn large_logits_stay_finite() {
        let rows = MaskRows {
            objects: 1,
            masks: 1,
            pixels: 4,
            focal: Focal {
                alpha: 0.25,
                gamma: 2.0,
            },
        };
        let logits = [-200.0f32, -30.0, 30.0, 200.0];
        let targets = [1.0f32, 0.0, 1.0, 0.0];
        let sums = mask_loss_sums(&logits, &targets, &rows);
        let grad = mask_loss_sums_grad(&logits, &targets, &[1.0; MASK_LOSS_SUMS], &rows);
        assert!(
            sums.iter().chain(&grad).all(|v| v.is_finite()),
            "{sums:?} {grad:?}"
        );
        // The two confident mistakes dominate the focal sum: 0.25 · 200 + 0.75 · 200.
        assert!((sums[0] - 200.0).abs() < 1e-3, "{}", sums[0]);
    }

    #[test]
    fn shapes_that_do_not_fit_are_refused() {
        let rows = MaskRows {
            objects: 2,
            masks: 3,
            pixels: 4,
            focal: Focal {
                alpha: -1.0,
                gamma: 0.0,
            },
        };
        assert!(rows.fits(&[0.0f32; 24], &[0.0f32; 8]));
        assert!(!rows.fits(&[0.0f32; 24], &[0.0f32; 24]));
        assert!(!rows.fits(&[0.0f32; 23], &[0.0f32; 8]));
    }

    /// Values and gradients of the dispatch (our kernels on `Autodiff<Flex>` and on plain
    /// `Flex`) against [`mask_loss_sums_by_burn`] on `Autodiff<Flex>`: in f64 to rounding, in
    /// f32 within 3× the f32 error of Burn's composition (both against the f64 result).
    #[test]
    fn dispatch_matches_burns_ops_values_and_gradients() {
        use burn::backend::{Autodiff, Flex};
        use burn::tensor::{DType, TensorData};

        use crate::fixtures::{rel_l2, tensor_values};
        use crate::nn::kernels::mask_loss_sums as dispatched;

        type Ad = Autodiff<Flex>;
        let tensor = |values: Vec<f64>, dtype: DType| {
            let len = values.len();
            Tensor::<Ad, 1>::from_data(TensorData::new(values, [len]), &Default::default())
                .cast(dtype)
        };
        // One pass for `(sums, dL/dlogits)` with `L = Σ sums · weights`.
        let run =
            |objects: usize, masks: usize, pixels: usize, focal: Focal, dtype: DType, own: bool| {
                let logits = tensor(
                    values(objects * masks * pixels, 21)
                        .iter()
                        .map(|v| 9.0 * v)
                        .collect(),
                    dtype,
                )
                .reshape([objects, masks, pixels])
                .require_grad();
                let targets = tensor(
                    values(objects * pixels, 23)
                        .iter()
                        .map(|v| f64::from(u8::from(*v > 0.0)))
                        .collect(),
                    dtype,
                )
                .reshape([objects, pixels]);
                let weights = tensor(values(objects * masks * MASK_LOSS_SUMS, 29), dtype)
                    .reshape([objects, masks, MASK_LOSS_SUMS]);
                let sums = if own {
                    dispatched(logits.clone(), targets.clone(), focal)
                } else {
                    mask_loss_sums_by_burn(logits.clone(), targets.clone(), focal)
                };
                let grads = (sums.clone() * weights).sum().backward();
                let grad = logits.grad(&grads).expect("the logits require a gradient");
                if own {
                    // Inference (plain Flex) gives the same sums.
                    let plain = dispatched(logits.inner(), targets.inner(), focal);
                    assert_eq!(tensor_values(plain), tensor_values(sums.clone().inner()));
                }
                [tensor_values(sums.inner()), tensor_values(grad)]
            };
        for (objects, masks, pixels, alpha, gamma) in [
            (2, 3, 2 * BLOCK + 37, 0.25, 2.0),
            (3, 1, 1, -1.0, 0.0),
            (1, 2, 50, 0.6, 1.5),
        ] {
            let focal = Focal { alpha, gamma };
            let exact = run(objects, masks, pixels, focal, DType::F64, false);
            let ours64 = run(objects, masks, pixels, focal, DType::F64, true);
            let ours32 = run(objects, masks, pixels, focal, DType::F32, true);
            let burn32 = run(objects, masks, pixels, focal, DType::F32, false);
            for k in 0..2 {
                let what = ["sums", "gradient"][k];
                let e64 = rel_l2(&ours64[k], &exact[k]);
                assert!(
                    e64 <= 1e-12,
                    "{what} f64 ({objects}, {masks}, {pixels}): {e64:e}"
                );
                let (ours, burn) = (rel_l2(&ours32[k], &exact[k]), rel_l2(&burn32[k], &exact[k]));
                assert!(
                    ours <= 3.0 * burn.max(1e-7),
                    "{what} f32 ({objects}, {masks}, {pixels}): ours {ours:e}, Burn's {burn:e}"
                );
            }
        }
    }
}

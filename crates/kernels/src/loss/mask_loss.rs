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

use super::mask_pixels::*;
use crate::float::NormFloat;
use crate::vector_math::{has_avx2, has_avx512};

/// Number of sums per row: focal, `Σ p t`, `Σ p`, `Σ t`, intersection, union.
pub const MASK_LOSS_SUMS: usize = 6;

/// Pixels one task handles.
pub(super) const BLOCK: usize = 8192;

/// Independent accumulators per sum in the forward pass: pixel `i` of a group of `LANES` adds
/// into lane `i`, so the compiler can run a group's pixels side by side without reordering an
/// addition; the lanes are added in order at the end of the block.
pub(super) const LANES: usize = 8;

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
    pub(super) fn target_row<'a, T>(&self, targets: &'a [T], row: usize) -> &'a [T] {
        let object = row / self.masks.max(1);
        &targets[object * self.pixels..(object + 1) * self.pixels]
    }
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
#[path = "mask_loss_tests.rs"]
mod tests;

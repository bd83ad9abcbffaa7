//! Multi-head scaled dot-product attention, `softmax(q kᵀ / √d) v` per head, forward and
//! backward, on the `[B, N, H·d]` token rows the projections produce (head `h` is columns
//! `h·d .. (h + 1)·d` of every row).
//!
//! Why our own: composed of Burn's ops, one attention is a head split (a reshape and a swap of
//! two dimensions: a strided view), two matmuls, a scalar product, a softmax of five ops and a
//! head merge (a copy through a strided index); backward, every split view's gradient arrives
//! as a permuted tensor that Flex's reshape copies element by element, and the softmax's
//! gradient is five more ops. Those copies were 7 % of a SAM2 head training step. Here every
//! (image, head) pair is one task: forward, the scores by one matrix product read in place
//! through the heads' strides, the softmax in f64 over each row, and the output by a second
//! product; backward, from the probabilities the forward pass kept, four products and one pass
//! over the scores. Each task runs on one thread, so results do not depend on the number of
//! threads.

use burn::tensor::activation::softmax;
use burn::tensor::{backend::Backend, Tensor};
use gemm::Parallelism;
use rayon::prelude::*;

use crate::float::NormFloat;
use crate::product::{GemmFloat, Product};
use crate::vector_math::{exp_nonpositive, has_avx2, has_avx512};

/// The float types the attention kernels take.
pub trait AttentionFloat: GemmFloat + NormFloat {}

impl AttentionFloat for f32 {}
impl AttentionFloat for f64 {}

/// Below this many multiply-adds (forward) an attention runs on the calling thread. Handing
/// tasks to the pool and waking it costs tens of microseconds on a 2-core machine; SAM2's
/// decoder attentions (batch 1, 10 tokens against 256 image tokens, 8 heads) have 0.7 million.
const THREADED_ATTENTION: usize = 4 << 20;

/// The sizes of one attention: queries `[batch, queries, heads·head_dim]`, keys `[batch, keys,
/// heads·head_dim]`, values `[batch, keys, heads·value_dim]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    pub batch: usize,
    pub queries: usize,
    pub keys: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub value_dim: usize,
}

impl AttentionShape {
    /// Whether the slices have this shape, and no size is zero.
    pub fn fits<T>(&self, q: &[T], k: &[T], v: &[T]) -> bool {
        let s = self;
        [s.batch, s.queries, s.keys, s.heads, s.head_dim, s.value_dim]
            .iter()
            .all(|&n| n > 0)
            && q.len() == s.batch * s.queries * s.heads * s.head_dim
            && k.len() == s.batch * s.keys * s.heads * s.head_dim
            && v.len() == s.batch * s.keys * s.heads * s.value_dim
    }

    /// Length of the `[B, H, Nq, Nk]` probabilities.
    pub fn probs_len(&self) -> usize {
        self.batch * self.heads * self.queries * self.keys
    }

    /// Length of the `[B, Nq, H·dv]` output.
    pub fn out_len(&self) -> usize {
        self.batch * self.queries * self.heads * self.value_dim
    }

    /// How many (image, head) tasks one thread takes at least: all of them when the whole
    /// attention is below [`THREADED_ATTENTION`] multiply-adds, so that a small one never
    /// wakes the pool.
    fn tasks_per_thread(&self) -> usize {
        let multiply_adds = self.probs_len() * (self.head_dim + self.value_dim);
        if multiply_adds < THREADED_ATTENTION {
            self.batch * self.heads
        } else {
            1
        }
    }

    /// `1 / √d`, PyTorch's default scale.
    fn scale(&self) -> f64 {
        1.0 / (self.head_dim as f64).sqrt()
    }

    /// Head `head` of image `image` of `[B, N, H·width]` rows: the slice from its first
    /// element, and the row stride.
    fn head<'a, T>(
        &self,
        x: &'a [T],
        tokens: usize,
        width: usize,
        task: usize,
    ) -> (&'a [T], usize) {
        let (image, head) = (task / self.heads, task % self.heads);
        let row = self.heads * width;
        (&x[image * tokens * row + head * width..], row)
    }
}

/// `(out, probs)`: the `[B, Nq, H·dv]` attention output and the `[B, H, Nq, Nk]` softmax
/// probabilities (which [`attention_backward`] reads).
///
/// # Panics
/// If the slices do not fit `shape` (a caller bug: the dispatch checks [`AttentionShape::fits`]).
pub fn attention_forward<T: AttentionFloat>(
    q: &[T],
    k: &[T],
    v: &[T],
    shape: &AttentionShape,
) -> (Vec<T>, Vec<T>) {
    assert!(shape.fits(q, k, v), "{shape:?}");
    let s = *shape;
    let (nq, nk, d, dv) = (s.queries, s.keys, s.head_dim, s.value_dim);
    let mut probs = vec![T::default(); s.probs_len()];
    let heads: Vec<Vec<T>> = probs
        .par_chunks_mut(nq * nk)
        .with_min_len(s.tasks_per_thread())
        .enumerate()
        .map(|(task, p)| {
            let (q_h, q_rows) = s.head(q, nq, d, task);
            let (k_h, k_rows) = s.head(k, nk, d, task);
            let (v_h, v_rows) = s.head(v, nk, dv, task);
            // Scores: q_h (Nq×d) · k_hᵀ (d×Nk), kᵀ read through k's strides.
            Product {
                shape: [nq, nk, d],
                lhs: (q_h, [q_rows, 1]),
                rhs: (k_h, [1, k_rows]),
            }
            .into_rows(p, nk, false, Parallelism::None);
            softmax_rows(p, nk, s.scale());
            let mut out = vec![T::default(); nq * dv];
            Product {
                shape: [nq, dv, nk],
                lhs: (&*p, [nk, 1]),
                rhs: (v_h, [v_rows, 1]),
            }
            .into_rows(&mut out, dv, false, Parallelism::None);
            out
        })
        .collect();
    let mut out = vec![T::default(); s.out_len()];
    merge_heads(&mut out, &heads, &s, nq, dv);
    (out, probs)
}

/// `[dq, dk, dv]` of [`attention_forward`] given `dL/dout` (`[B, Nq, H·dv]`) and the
/// probabilities it returned.
///
/// With `P` the probabilities and `dO` a head's output gradient: `dV = Pᵀ dO`, `dP = dO Vᵀ`,
/// `dS = P ⊙ (dP − rowsum(dP ⊙ P)) / √d`, `dQ = dS K`, `dK = dSᵀ Q`.
///
/// # Panics
/// If the slices do not fit `shape`.
pub fn attention_backward<T: AttentionFloat>(
    q: &[T],
    k: &[T],
    v: &[T],
    probs: &[T],
    output_grad: &[T],
    shape: &AttentionShape,
) -> [Vec<T>; 3] {
    assert!(shape.fits(q, k, v), "{shape:?}");
    let s = *shape;
    assert_eq!(probs.len(), s.probs_len());
    assert_eq!(output_grad.len(), s.out_len());
    let (nq, nk, d, dv) = (s.queries, s.keys, s.head_dim, s.value_dim);
    let heads: Vec<[Vec<T>; 3]> = probs
        .par_chunks(nq * nk)
        .with_min_len(s.tasks_per_thread())
        .enumerate()
        .map(|(task, p)| {
            let (q_h, q_rows) = s.head(q, nq, d, task);
            let (k_h, k_rows) = s.head(k, nk, d, task);
            let (v_h, v_rows) = s.head(v, nk, dv, task);
            let (do_h, do_rows) = s.head(output_grad, nq, dv, task);
            // dV (Nk×dv) = Pᵀ (Nk×Nq) · dO (Nq×dv).
            let mut v_grad = vec![T::default(); nk * dv];
            Product {
                shape: [nk, dv, nq],
                lhs: (p, [1, nk]),
                rhs: (do_h, [do_rows, 1]),
            }
            .into_rows(&mut v_grad, dv, false, Parallelism::None);
            // dP (Nq×Nk) = dO (Nq×dv) · Vᵀ (dv×Nk), then dS in place.
            let mut scores_grad = vec![T::default(); nq * nk];
            Product {
                shape: [nq, nk, dv],
                lhs: (do_h, [do_rows, 1]),
                rhs: (v_h, [1, v_rows]),
            }
            .into_rows(&mut scores_grad, nk, false, Parallelism::None);
            softmax_grad_rows(&mut scores_grad, p, nk, s.scale());
            // dQ (Nq×d) = dS (Nq×Nk) · K (Nk×d); dK (Nk×d) = dSᵀ (Nk×Nq) · Q (Nq×d).
            let mut q_grad = vec![T::default(); nq * d];
            Product {
                shape: [nq, d, nk],
                lhs: (&scores_grad, [nk, 1]),
                rhs: (k_h, [k_rows, 1]),
            }
            .into_rows(&mut q_grad, d, false, Parallelism::None);
            let mut k_grad = vec![T::default(); nk * d];
            Product {
                shape: [nk, d, nq],
                lhs: (&scores_grad, [1, nk]),
                rhs: (q_h, [q_rows, 1]),
            }
            .into_rows(&mut k_grad, d, false, Parallelism::None);
            [q_grad, k_grad, v_grad]
        })
        .collect();
    let merged = |which: usize, tokens: usize, width: usize| {
        let parts: Vec<&Vec<T>> = heads.iter().map(|h| &h[which]).collect();
        let mut out = vec![T::default(); s.batch * tokens * s.heads * width];
        merge_heads(&mut out, &parts, &s, tokens, width);
        out
    };
    [merged(0, nq, d), merged(1, nk, d), merged(2, nk, dv)]
}

/// Writes each task's `[tokens, width]` block into its head's columns of `[B, tokens,
/// H·width]` rows.
fn merge_heads<T: Copy>(
    out: &mut [T],
    parts: &[impl AsRef<[T]>],
    s: &AttentionShape,
    tokens: usize,
    width: usize,
) {
    let row = s.heads * width;
    for (image, rows) in out.chunks_mut(tokens * row).enumerate() {
        for (token, row) in rows.chunks_mut(s.heads * width).enumerate() {
            for (head, columns) in row.chunks_mut(width).enumerate() {
                let part = parts[image * s.heads + head].as_ref();
                columns.copy_from_slice(&part[token * width..][..width]);
            }
        }
    }
}

/// Each `row_len` row of `scores` becomes `softmax(scale · row)`, computed in f64.
fn softmax_rows<T: NormFloat>(scores: &mut [T], row_len: usize, scale: f64) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU has AVX-512F.
        return unsafe { softmax_rows_avx512(scores, row_len, scale) };
    } else if has_avx2() {
        // SAFETY: the CPU has AVX2.
        return unsafe { softmax_rows_avx2(scores, row_len, scale) };
    }
    softmax_rows_portable(scores, row_len, scale)
}

/// [`softmax_rows_portable`] compiled with AVX-512 (the same bits: nothing is reordered).
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_rows_avx512<T: NormFloat>(scores: &mut [T], row_len: usize, scale: f64) {
    softmax_rows_portable(scores, row_len, scale)
}

/// [`softmax_rows_portable`] compiled with AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn softmax_rows_avx2<T: NormFloat>(scores: &mut [T], row_len: usize, scale: f64) {
    softmax_rows_portable(scores, row_len, scale)
}

#[inline(always)]
fn softmax_rows_portable<T: NormFloat>(scores: &mut [T], row_len: usize, scale: f64) {
    let mut exps = vec![0.0f64; row_len];
    for row in scores.chunks_exact_mut(row_len) {
        // The row's maximum (a NaN score makes every probability NaN below).
        let mut max = f64::NEG_INFINITY;
        for &s in row.iter() {
            let s = s.to_f64();
            if s > max {
                max = s;
            }
        }
        for (e, &s) in exps.iter_mut().zip(row.iter()) {
            *e = exp_nonpositive(scale * (s.to_f64() - max));
        }
        let total: f64 = exps.iter().sum();
        let inverse = 1.0 / total;
        for (p, &e) in row.iter_mut().zip(&exps) {
            *p = T::from_f64(e * inverse);
        }
    }
}

/// `dS = scale · P ⊙ (dP − rowsum(dP ⊙ P))` in place of `dP`, row by row, in f64.
fn softmax_grad_rows<T: NormFloat>(grad: &mut [T], probs: &[T], row_len: usize, scale: f64) {
    for (g, p) in grad
        .chunks_exact_mut(row_len)
        .zip(probs.chunks_exact(row_len))
    {
        let dot: f64 = g
            .iter()
            .zip(p)
            .map(|(&g, &p)| g.to_f64() * p.to_f64())
            .sum();
        for (g, &p) in g.iter_mut().zip(p) {
            *g = T::from_f64(scale * p.to_f64() * (g.to_f64() - dot));
        }
    }
}

/// The same attention composed of Burn's ops (with Burn's gradients): what every backend but
/// CPU f32/f64 computes, and the reference of the kernels' parity tests. q `[B, Nq, H·d]`,
/// k `[B, Nk, H·d]`, v `[B, Nk, H·dv]` -> `[B, Nq, H·dv]`.
pub fn attention_by_burn<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    heads: usize,
) -> Tensor<B, 3> {
    attention_and_probs_by_burn(q, k, v, heads).0
}

/// [`attention_by_burn`] and its `[B, H, Nq, Nk]` softmax probabilities.
pub fn attention_and_probs_by_burn<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    heads: usize,
) -> (Tensor<B, 3>, Tensor<B, 4>) {
    let (q, k, v) = (
        separate_heads(q, heads),
        separate_heads(k, heads),
        separate_heads(v, heads),
    );
    let head_dim = q.dims()[3];
    // The heads stay strided views of `[B, N, H·d]`, which Flex's matmul reads in place.
    let scores = q.matmul(k.swap_dims(2, 3)) * (1.0 / (head_dim as f64).sqrt());
    let probs = softmax(scores, 3);
    let out = probs.clone().matmul(v);
    let [batch, heads, tokens, width] = out.dims();
    (
        out.swap_dims(1, 2).reshape([batch, tokens, heads * width]),
        probs,
    )
}

/// `[B, N, H·d] -> [B, H, N, d]`, a view.
fn separate_heads<B: Backend>(x: Tensor<B, 3>, heads: usize) -> Tensor<B, 4> {
    let [batch, tokens, width] = x.dims();
    x.reshape([batch, tokens, heads, width / heads])
        .swap_dims(1, 2)
}

#[cfg(test)]
#[path = "math_tests.rs"]
mod tests;

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
//! product, a tile of query rows at a time; backward, the tile's probabilities recomputed from
//! the row statistics the forward kept ([`super::softmax`]), four products and one pass over
//! the scores. Only a tile's scores exist at a time (a Hiera global block's 4096 × 4096 per head
//! would be 64 MiB, four of them kept per block for the backward). Each task runs on one
//! thread, so results do not depend on the number of threads.

use burn::tensor::activation::softmax;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{backend::Backend, Tensor};
use gemm::Parallelism;
use rayon::prelude::*;

use super::softmax::{probs_from_stats, softmax_grad_rows, softmax_rows, STATS_PER_ROW};
use crate::float::NormFloat;
use crate::product::{GemmFloat, Product};

/// The float types the attention kernels take.
pub trait AttentionFloat: GemmFloat + NormFloat {}

impl AttentionFloat for f32 {}
impl AttentionFloat for f64 {}

/// Below this many multiply-adds (forward) an attention runs on the calling thread. Handing
/// tasks to the pool and waking it costs tens of microseconds on a 2-core machine; SAM2's
/// decoder attentions (batch 1, 10 tokens against 256 image tokens, 8 heads) have 0.7 million.
const THREADED_ATTENTION: usize = 4 << 20;

/// Scores one tile of query rows holds (1 MiB in f32): small enough to stay in the cache
/// between the two products, large enough that the products run at full speed (64 query rows
/// against Hiera's 4096 global keys).
const TILE_SCORES: usize = 1 << 18;

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
    /// Whether the rows have this shape, and no size is zero.
    pub fn fits<T>(&self, q: TokenRows<T>, k: TokenRows<T>, v: TokenRows<T>) -> bool {
        let s = self;
        [s.batch, s.queries, s.keys, s.heads, s.head_dim, s.value_dim]
            .iter()
            .all(|&n| n > 0)
            && q.holds(s.batch * s.queries, s.heads * s.head_dim)
            && k.holds(s.batch * s.keys, s.heads * s.head_dim)
            && v.holds(s.batch * s.keys, s.heads * s.value_dim)
    }

    /// Number of scores, `B · H · Nq · Nk`.
    pub fn scores_len(&self) -> usize {
        self.batch * self.heads * self.queries * self.keys
    }

    /// Length of the `[B, H, Nq, 2]` row statistics the forward keeps for the backward.
    pub fn stats_len(&self) -> usize {
        self.batch * self.heads * self.queries * STATS_PER_ROW
    }

    /// Query rows per tile: whole rows of scores, about [`TILE_SCORES`] of them.
    pub fn tile_rows(&self) -> usize {
        (TILE_SCORES / self.keys.max(1)).clamp(1, self.queries.max(1))
    }

    /// Length of the `[B, Nq, H·dv]` output.
    pub fn out_len(&self) -> usize {
        self.batch * self.queries * self.heads * self.value_dim
    }

    /// How many (image, head) tasks one thread takes at least: all of them when the whole
    /// attention is below [`THREADED_ATTENTION`] multiply-adds, so that a small one never
    /// wakes the pool.
    fn tasks_per_thread(&self) -> usize {
        let multiply_adds = self.scores_len() * (self.head_dim + self.value_dim);
        if multiply_adds < THREADED_ATTENTION {
            self.batch * self.heads
        } else {
            1
        }
    }

    /// The products of a task run on the whole pool when a large attention has fewer tasks than
    /// threads (SAM 2's memory attention: 1 head, 4096 queries, ~30 000 keys), else on its thread.
    fn product_parallelism(&self) -> Parallelism {
        let threads = rayon::current_num_threads();
        let multiply_adds = self.scores_len() * (self.head_dim + self.value_dim);
        if self.batch * self.heads < threads && multiply_adds >= THREADED_ATTENTION {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
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
        x: TokenRows<'a, T>,
        tokens: usize,
        width: usize,
        task: usize,
    ) -> (&'a [T], usize) {
        let (image, head) = (task / self.heads, task % self.heads);
        (
            &x.data[image * tokens * x.stride + head * width..],
            x.stride,
        )
    }
}

/// `[B, N, W]` token rows in a buffer, row `i` (counted across the images) from element
/// `i · stride`: a row-major tensor (`stride = W`), or a column range of a wider one read in
/// place (Hiera's q, k and v are the thirds of its qkv rows).
#[derive(Debug)]
pub struct TokenRows<'a, T> {
    pub data: &'a [T],
    pub stride: usize,
}

impl<T> Clone for TokenRows<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for TokenRows<'_, T> {}

impl<'a, T> TokenRows<'a, T> {
    /// Row-major rows of `width` elements.
    pub fn packed(data: &'a [T], width: usize) -> Self {
        Self {
            data,
            stride: width,
        }
    }

    /// Whether `rows` rows of `width` elements lie in the buffer.
    fn holds(&self, rows: usize, width: usize) -> bool {
        let last = (rows.max(1) - 1).checked_mul(self.stride);
        width <= self.stride && last.is_some_and(|l| l.checked_add(width) <= Some(self.data.len()))
    }
}

/// `(out, stats)`: the `[B, Nq, H·dv]` attention output and the `[B, H, Nq, 2]` row statistics
/// of its softmax (see [`softmax_rows`]), which [`attention_backward`] reads.
///
/// Each (image, head) task walks its queries in tiles of [`AttentionShape::tile_rows`] rows:
/// a tile's scores (whole rows, so the softmax needs no rescaling), their softmax and their
/// share of the output; the `Nq × Nk` probabilities never exist at once.
///
/// # Panics
/// If the slices do not fit `shape` (a caller bug: the dispatch checks [`AttentionShape::fits`]).
pub fn attention_forward<T: AttentionFloat>(
    q: TokenRows<T>,
    k: TokenRows<T>,
    v: TokenRows<T>,
    shape: &AttentionShape,
) -> (Vec<T>, Vec<f64>) {
    assert!(shape.fits(q, k, v), "{shape:?}");
    let s = *shape;
    let (nq, nk, d, dv) = (s.queries, s.keys, s.head_dim, s.value_dim);
    let mut stats = vec![0.0f64; s.stats_len()];
    let inner = s.product_parallelism();
    let heads: Vec<Vec<T>> = stats
        .par_chunks_mut(nq * STATS_PER_ROW)
        .with_min_len(s.tasks_per_thread())
        .enumerate()
        .map(|(task, stats)| {
            let (q_h, q_rows) = s.head(q, nq, d, task);
            let (k_h, k_rows) = s.head(k, nk, d, task);
            let (v_h, v_rows) = s.head(v, nk, dv, task);
            let mut probs = vec![T::default(); s.tile_rows() * nk];
            let mut out = vec![T::default(); nq * dv];
            for start in (0..nq).step_by(s.tile_rows()) {
                let rows = s.tile_rows().min(nq - start);
                let p = &mut probs[..rows * nk];
                // Scores: q rows (rows×d) · k_hᵀ (d×Nk), kᵀ read through k's strides.
                Product {
                    shape: [rows, nk, d],
                    lhs: (&q_h[start * q_rows..], [q_rows, 1]),
                    rhs: (k_h, [1, k_rows]),
                }
                .into_rows(p, nk, false, inner);
                let tile_stats = &mut stats[start * STATS_PER_ROW..][..rows * STATS_PER_ROW];
                softmax_rows(p, nk, s.scale(), tile_stats);
                Product {
                    shape: [rows, dv, nk],
                    lhs: (&*p, [nk, 1]),
                    rhs: (v_h, [v_rows, 1]),
                }
                .into_rows(&mut out[start * dv..], dv, false, inner);
            }
            out
        })
        .collect();
    let mut out = vec![T::default(); s.out_len()];
    merge_heads(&mut out, &heads, &s, nq, dv);
    (out, stats)
}

/// `[dq, dk, dv]` of [`attention_forward`] given `dL/dout` (`[B, Nq, H·dv]`) and the row
/// statistics it returned.
///
/// With `P` the probabilities and `dO` a head's output gradient: `dV = Pᵀ dO`, `dP = dO Vᵀ`,
/// `dS = P ⊙ (dP − rowsum(dP ⊙ P)) / √d`, `dQ = dS K`, `dK = dSᵀ Q`, tile by tile of queries
/// as the forward: a tile's `P` is recomputed from its scores and the statistics (the same
/// bits as the forward's), `dQ`'s rows are the tile's own, `dK` and `dV` sum over the tiles.
///
/// # Panics
/// If the slices do not fit `shape`.
pub fn attention_backward<T: AttentionFloat>(
    q: TokenRows<T>,
    k: TokenRows<T>,
    v: TokenRows<T>,
    stats: &[f64],
    output_grad: &[T],
    shape: &AttentionShape,
) -> [Vec<T>; 3] {
    assert!(shape.fits(q, k, v), "{shape:?}");
    let s = *shape;
    assert_eq!(stats.len(), s.stats_len());
    assert_eq!(output_grad.len(), s.out_len());
    let (nq, nk, d, dv) = (s.queries, s.keys, s.head_dim, s.value_dim);
    let inner = s.product_parallelism();
    let heads: Vec<[Vec<T>; 3]> = stats
        .par_chunks(nq * STATS_PER_ROW)
        .with_min_len(s.tasks_per_thread())
        .enumerate()
        .map(|(task, stats)| {
            let (q_h, q_rows) = s.head(q, nq, d, task);
            let (k_h, k_rows) = s.head(k, nk, d, task);
            let (v_h, v_rows) = s.head(v, nk, dv, task);
            let output_grad = TokenRows::packed(output_grad, s.heads * dv);
            let (do_h, do_rows) = s.head(output_grad, nq, dv, task);
            let mut probs = vec![T::default(); s.tile_rows() * nk];
            let mut scores_grad = vec![T::default(); s.tile_rows() * nk];
            let mut q_grad = vec![T::default(); nq * d];
            let mut k_grad = vec![T::default(); nk * d];
            let mut v_grad = vec![T::default(); nk * dv];
            for start in (0..nq).step_by(s.tile_rows()) {
                let rows = s.tile_rows().min(nq - start);
                // The first tile writes dK and dV, the others add to them.
                let accumulate = start > 0;
                let (q_t, do_t) = (&q_h[start * q_rows..], &do_h[start * do_rows..]);
                let p = &mut probs[..rows * nk];
                Product {
                    shape: [rows, nk, d],
                    lhs: (q_t, [q_rows, 1]),
                    rhs: (k_h, [1, k_rows]),
                }
                .into_rows(p, nk, false, inner);
                let tile_stats = &stats[start * STATS_PER_ROW..][..rows * STATS_PER_ROW];
                probs_from_stats(p, nk, s.scale(), tile_stats);
                // dV (Nk×dv) += Pᵀ (Nk×rows) · dO (rows×dv).
                Product {
                    shape: [nk, dv, rows],
                    lhs: (&*p, [1, nk]),
                    rhs: (do_t, [do_rows, 1]),
                }
                .into_rows(&mut v_grad, dv, accumulate, inner);
                // dP (rows×Nk) = dO (rows×dv) · Vᵀ (dv×Nk), then dS in place.
                let g = &mut scores_grad[..rows * nk];
                Product {
                    shape: [rows, nk, dv],
                    lhs: (do_t, [do_rows, 1]),
                    rhs: (v_h, [1, v_rows]),
                }
                .into_rows(g, nk, false, inner);
                softmax_grad_rows(g, p, nk, s.scale());
                // dQ (rows×d) = dS (rows×Nk) · K (Nk×d); dK (Nk×d) += dSᵀ (Nk×rows) · Q (rows×d).
                Product {
                    shape: [rows, d, nk],
                    lhs: (&*g, [nk, 1]),
                    rhs: (k_h, [k_rows, 1]),
                }
                .into_rows(&mut q_grad[start * d..], d, false, inner);
                Product {
                    shape: [nk, d, rows],
                    lhs: (&*g, [1, nk]),
                    rhs: (q_t, [q_rows, 1]),
                }
                .into_rows(&mut k_grad, d, accumulate, inner);
            }
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

/// The same attention by Burn's `attention` op on the heads (the fused kernel on CUDA and wgpu;
/// under autodiff, Burn's composition of ops).
pub fn attention_by_burn_op<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    heads: usize,
) -> Tensor<B, 3> {
    let [q, k, v] = [q, k, v].map(|x| separate_heads(x, heads));
    // F.scaled_dot_product_attention's defaults: scale 1/√d, no mask, no dropout.
    let out = attention(q, k, v, None, None, AttentionModuleOptions::default());
    let [batch, heads, tokens, width] = out.dims();
    crate::permute(out, [0, 2, 1, 3]).reshape([batch, tokens, heads * width])
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

//! Rotary position encoding over a 2D feature map (`compute_axial_cis`, `apply_rotary_enc` and
//! `RoPEAttention` in the official `position_encoding.py` / `transformer.py`).
//!
//! A head of width `d` is read as `d/2` complex pairs `(x[2i], x[2i+1])`. The first `d/4` pairs
//! rotate by the token's column times `θ^(-4i/d)`, the last `d/4` by its row times the same
//! frequencies. Memory attention rotates the queries (the current frame's tokens) and the
//! spatial memory keys; keys covering several memory frames reuse the table once per frame
//! (`rope_k_repeat`), and the object-pointer tokens at the end of the keys are not rotated.

use burn::tensor::{backend::Backend, DType, Tensor, TensorData};

use crate::sam2::attention::Attention;
use crate::sam2::layer_norm2d::statistics_dtype;
use crate::sam2::Sam2Error;
use segburn_kernels::multi_head_attention;

/// The cosines and sines of every (token, pair) of an `h × w` map: `[1, h·w, 1, d/2, 1]`, ready
/// to broadcast over `[B, tokens, heads, d/2, 1]`.
#[derive(Debug, Clone)]
pub struct AxialRope<B: Backend> {
    cos: Tensor<B, 5>,
    sin: Tensor<B, 5>,
    tokens: usize,
}

impl<B: Backend> AxialRope<B> {
    /// The table for heads of width `head_dim` (a multiple of 4) over an `h × w` map, in the
    /// computation dtype of `dtype` (f64 for f64, f32 otherwise).
    ///
    /// In f32 the angles are computed as the official code computes them (f32 powers, f32
    /// products); only the cosine and sine of each f32 angle are evaluated in f64 and rounded.
    pub fn new(
        head_dim: usize,
        theta: f64,
        [h, w]: [usize; 2],
        dtype: DType,
        device: &B::Device,
    ) -> Self {
        let quarter = head_dim / 4;
        let tokens = h * w;
        let wide = statistics_dtype(dtype) == burn::tensor::FloatDType::F64;
        let mut angles = Vec::with_capacity(tokens * 2 * quarter);
        for token in 0..tokens {
            let (column, row) = (token % w, token / w);
            // Columns on the first quarter of the pairs, rows on the second.
            for position in [column, row] {
                for pair in 0..quarter {
                    angles.push(if wide {
                        position as f64 / theta.powf((4 * pair) as f64 / head_dim as f64)
                    } else {
                        let frequency =
                            1.0f32 / (theta as f32).powf((4 * pair) as f32 / head_dim as f32);
                        (position as f32 * frequency) as f64
                    });
                }
            }
        }
        let table = |f: fn(f64) -> f64| {
            let values: Vec<f64> = angles.iter().map(|&a| f(a)).collect();
            let shape = [1, tokens, 1, 2 * quarter, 1];
            if wide {
                Tensor::from_data(TensorData::new(values, shape), (device, DType::F64))
            } else {
                let values: Vec<f32> = values.into_iter().map(|v| v as f32).collect();
                Tensor::from_data(TensorData::new(values, shape), device)
            }
        };
        Self {
            cos: table(f64::cos),
            sin: table(f64::sin),
            tokens,
        }
    }

    /// Rotates `[B, n·tokens, heads·head_dim]`: token `j` by the table's row `j mod tokens`.
    /// Computes in f32 (or f64) and returns the input's dtype, as the official `xq.float()`.
    fn rotate(&self, x: Tensor<B, 3>, heads: usize) -> Tensor<B, 3> {
        let [b, n, width] = x.dims();
        let dtype = x.dtype();
        let compute = statistics_dtype(dtype);
        let repeats = n / self.tokens;
        let expand = |t: &Tensor<B, 5>| {
            t.clone()
                .cast(compute)
                .repeat_dim(1, repeats)
                .repeat_dim(0, b)
                .repeat_dim(2, heads)
        };
        let (cos, sin) = (expand(&self.cos), expand(&self.sin));
        let x = x.cast(compute).reshape([b, n, heads, width / heads / 2, 2]);
        let real = x.clone().narrow(4, 0, 1);
        let imaginary = x.narrow(4, 1, 1);
        let rotated = Tensor::cat(
            vec![
                real.clone() * cos.clone() - imaginary.clone() * sin.clone(),
                real * sin + imaginary * cos,
            ],
            4,
        );
        rotated.reshape([b, n, width]).cast(dtype)
    }
}

impl<B: Backend> Attention<B> {
    /// `RoPEAttention.forward`: q `[B, Nq, E]`, k `[B, Nk, E_kv]`, v `[B, Nk, E_kv]` ->
    /// `[B, Nq, E]`, with the projected queries and the first `Nk - num_k_exclude_rope` keys
    /// rotated by `rope` (whose map must have `Nq` tokens). Those keys must be a whole number of
    /// maps (`rope_k_repeat` upstream: one map per memory frame).
    pub fn forward_with_rope(
        &self,
        q: Tensor<B, 3>,
        k: Tensor<B, 3>,
        v: Tensor<B, 3>,
        rope: &AxialRope<B>,
        num_k_exclude_rope: usize,
    ) -> Result<Tensor<B, 3>, Sam2Error> {
        let heads = self.num_heads();
        let q = self.q_proj.forward(q);
        let k = self.k_proj.forward(k);
        let v = self.v_proj.forward(v);
        let [_, nq, _] = q.dims();
        let [b, nk, width] = k.dims();
        if nq != rope.tokens {
            return Err(Sam2Error::shape(format!(
                "{nq} query tokens, but the rotary table covers a map of {} tokens",
                rope.tokens
            )));
        }
        let rotated_keys = nk.checked_sub(num_k_exclude_rope).ok_or_else(|| {
            Sam2Error::shape(format!(
                "{num_k_exclude_rope} keys to leave unrotated, but only {nk} keys"
            ))
        })?;
        if !rotated_keys.is_multiple_of(nq) {
            return Err(Sam2Error::shape(format!(
                "{rotated_keys} rotated keys are not a whole number of {nq}-token maps"
            )));
        }
        let q = rope.rotate(q, heads);
        let k = match (rotated_keys, num_k_exclude_rope) {
            (0, _) => k,
            (_, 0) => rope.rotate(k, heads),
            _ => Tensor::cat(
                vec![
                    rope.rotate(k.clone().narrow(1, 0, rotated_keys), heads),
                    k.narrow(1, rotated_keys, num_k_exclude_rope),
                ],
                1,
            ),
        };
        debug_assert_eq!(k.dims(), [b, nk, width]);
        let out = multi_head_attention(q, k, v, heads);
        Ok(self.out_proj.forward(out))
    }
}

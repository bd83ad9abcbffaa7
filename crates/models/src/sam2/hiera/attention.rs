//! Hiera's `MultiScaleAttention`: self-attention over the tokens of one window (or of the whole
//! map for a global block), with the queries optionally max-pooled by 2 at a stage transition.
//!
//! Only the queries are pooled: a pooled 7×7 window of queries attends to the 14×14 keys and
//! values it came from, so the output has the pooled size.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{backend::Backend, Tensor};

use super::window::max_pool_2x2;
use crate::sam2::linear::{Linear, LinearConfig};
use segburn_kernels as kernels;

/// Configuration of a [`MultiScaleAttention`].
#[derive(Config, Debug)]
pub struct MultiScaleAttentionConfig {
    /// Input channels.
    pub dim: usize,
    /// Output channels (q, k and v have this width too).
    pub dim_out: usize,
    /// Heads; must divide `dim_out`.
    pub num_heads: usize,
    /// Whether the queries are max-pooled 2×2 (the first block of a stage).
    #[config(default = false)]
    pub q_pool: bool,
}

/// `proj(softmax(q kᵀ / √d) v)` with `q, k, v = qkv(x)` and optionally pooled `q`.
#[derive(Module, Debug)]
pub struct MultiScaleAttention<B: Backend> {
    /// `[3·dim_out, dim]`: rows are `[q | k | v]`, each head-major.
    pub qkv: Linear<B>,
    /// `[dim_out, dim_out]`.
    pub proj: Linear<B>,
    num_heads: usize,
    q_pool: bool,
}

impl MultiScaleAttentionConfig {
    /// Builds the layer with PyTorch's default `Linear` initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> MultiScaleAttention<B> {
        MultiScaleAttention {
            qkv: LinearConfig::new(self.dim, 3 * self.dim_out).init(device),
            proj: LinearConfig::new(self.dim_out, self.dim_out).init(device),
            num_heads: self.num_heads,
            q_pool: self.q_pool,
        }
    }
}

impl<B: Backend> MultiScaleAttention<B> {
    /// `[N, h, w, dim] -> [N, h', w', dim_out]`, with `(h', w') = (h/2, w/2)` when the queries
    /// are pooled and `(h, w)` otherwise. There is no mask: every token of the window, padding
    /// included, is a key.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let [n, h, w, _] = x.dims();
        let dim_out = self.proj.d_output();
        // [N, h·w, 3·dim_out]: each token's row is [q | k | v], each of them head-major, which
        // is the token-row layout the attention kernels take (head `i` = columns i·d..(i+1)·d).
        let qkv = self.qkv.forward(x).reshape([n, h * w, 3 * dim_out]);
        let part = |i: usize| qkv.clone().narrow(2, i * dim_out, dim_out);
        let (mut q, k, v) = (part(0), part(1), part(2));
        let [mut out_h, mut out_w] = [h, w];
        if self.q_pool {
            // Pooling is per channel, so pooling the queries' channel-last map is the
            // official pooling of `[N, h, w, dim_out]`.
            let pooled = max_pool_2x2(q.reshape([n, h, w, dim_out]));
            [out_h, out_w] = [h / 2, w / 2];
            q = pooled.reshape([n, out_h * out_w, dim_out]);
        }
        // F.scaled_dot_product_attention's defaults: scale 1/√d, no mask, no dropout.
        let out = kernels::fused_multi_head_attention(q, k, v, self.num_heads);
        self.proj.forward(out.reshape([n, out_h, out_w, dim_out]))
    }
}

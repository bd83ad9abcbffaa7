//! Hiera's `MultiScaleBlock`: pre-norm windowed (or global) attention and an MLP, each with a
//! residual connection.
//!
//! The first block of a stage is the transition: it doubles the width, pools the queries by 2,
//! and its residual is `maxpool(proj(norm1(x)))`, taken from the *normed* input. Windows are cut
//! after `norm1`, so the zero padding enters attention as zeros (whose keys and values are the
//! qkv bias), unmasked.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{backend::Backend, Tensor};

use super::attention::{MultiScaleAttention, MultiScaleAttentionConfig};
use super::window::{max_pool_2x2, padded_size, window_partition, window_unpartition};
use crate::sam2::layer_norm2d::{LayerNorm, LayerNormConfig};
use crate::sam2::linear::{Linear, LinearConfig};
use crate::sam2::mlp::{Mlp, MlpActivation, MlpConfig};

/// Hiera's norms: `partial(nn.LayerNorm, eps=1e-6)`.
const NORM_EPSILON: f64 = 1e-6;

/// Configuration of a [`MultiScaleBlock`].
#[derive(Config, Debug)]
pub struct MultiScaleBlockConfig {
    /// Input channels.
    pub dim: usize,
    /// Output channels.
    pub dim_out: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// Window side; 0 means global attention over the whole map.
    pub window_size: usize,
    /// Whether the queries (and the residual) are max-pooled by 2.
    #[config(default = false)]
    pub q_pool: bool,
    /// Hidden width of the MLP relative to `dim_out`.
    #[config(default = 4.0)]
    pub mlp_ratio: f64,
}

/// One Hiera block; field names are the official keys (`blocks.{i}.norm1.weight`, …).
#[derive(Module, Debug)]
pub struct MultiScaleBlock<B: Backend> {
    /// `LayerNorm(dim, eps=1e-6)`.
    pub norm1: LayerNorm<B>,
    /// The attention.
    pub attn: MultiScaleAttention<B>,
    /// `LayerNorm(dim_out, eps=1e-6)`.
    pub norm2: LayerNorm<B>,
    /// `dim_out → mlp_ratio·dim_out → dim_out`, exact GELU.
    pub mlp: Mlp<B>,
    /// The residual's projection, only when the width changes (`dim → dim_out`).
    pub proj: Option<Linear<B>>,
    window_size: usize,
    q_pool: bool,
}

impl MultiScaleBlockConfig {
    /// Builds the block.
    pub fn init<B: Backend>(&self, device: &B::Device) -> MultiScaleBlock<B> {
        let hidden = (self.dim_out as f64 * self.mlp_ratio) as usize;
        MultiScaleBlock {
            norm1: LayerNormConfig::new(self.dim)
                .with_epsilon(NORM_EPSILON)
                .init(device),
            attn: MultiScaleAttentionConfig::new(self.dim, self.dim_out, self.num_heads)
                .with_q_pool(self.q_pool)
                .init(device),
            norm2: LayerNormConfig::new(self.dim_out)
                .with_epsilon(NORM_EPSILON)
                .init(device),
            mlp: MlpConfig::new(self.dim_out, hidden, self.dim_out, 2)
                .with_activation(MlpActivation::Gelu)
                .init(device),
            proj: (self.dim != self.dim_out)
                .then(|| LinearConfig::new(self.dim, self.dim_out).init(device)),
            window_size: self.window_size,
            q_pool: self.q_pool,
        }
    }
}

impl<B: Backend> MultiScaleBlock<B> {
    /// Window side (0: global attention).
    pub fn window_size(&self) -> usize {
        self.window_size
    }

    /// Whether this block pools (a stage transition).
    pub fn pools(&self) -> bool {
        self.q_pool
    }

    /// `[B, H, W, dim] -> [B, H', W', dim_out]` (BHWC), `H' = H/2` when pooling.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.forward_dropping(x, [None, None])
    }

    /// [`Self::forward`] with the attention and MLP branch outputs multiplied by per-sample
    /// `[B, 1, 1, 1]` factors (stochastic depth in training; see [`super::drop_path`]).
    pub fn forward_dropping(
        &self,
        x: Tensor<B, 4>,
        factors: [Option<Tensor<B, 4>>; 2],
    ) -> Tensor<B, 4> {
        let [attention_factor, mlp_factor] = factors;
        let scale = |t: Tensor<B, 4>, factor: Option<Tensor<B, 4>>| match factor {
            Some(f) => t * f,
            None => t,
        };
        let [_, h, w, _] = x.dims();
        let normed = self.norm1.forward(x.clone());
        let pool = |t: Tensor<B, 4>| if self.q_pool { max_pool_2x2(t) } else { t };
        let shortcut = match &self.proj {
            Some(proj) => pool(proj.forward(normed.clone())),
            None => x,
        };
        let ws = self.window_size;
        let attended = if ws > 0 {
            let (windows, _) = window_partition(normed, ws);
            let out = self.attn.forward(windows);
            // After pooling, windows are half as wide and tile the pooled map's own padding.
            let (out_ws, size) = if self.q_pool {
                (ws / 2, [h / 2, w / 2])
            } else {
                (ws, [h, w])
            };
            window_unpartition(out, out_ws, padded_size(size, out_ws), size)
        } else {
            self.attn.forward(normed)
        };
        let x = shortcut + scale(attended, attention_factor);
        x.clone() + scale(self.mlp.forward(self.norm2.forward(x)), mlp_factor)
    }
}

//! SAM's attention layer: multi-head attention with an optional down-projection of the
//! internal width (`downsample_rate`), which Burn's `MultiHeadAttention` does not offer.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{backend::Backend, Tensor};

use super::linear::{Linear, LinearConfig};
use segburn_kernels::multi_head_attention;

/// Configuration of an [`Attention`] layer.
#[derive(Config, Debug)]
pub struct AttentionConfig {
    /// Width of queries and outputs.
    pub embedding_dim: usize,
    /// Number of heads; must divide `embedding_dim / downsample_rate`.
    pub num_heads: usize,
    /// The internal width is `embedding_dim / downsample_rate` (2 for SAM's cross-attention).
    #[config(default = 1)]
    pub downsample_rate: usize,
    /// Width of keys and values, when it differs from `embedding_dim`.
    #[config(default = "None")]
    pub kv_in_dim: Option<usize>,
}

/// `out_proj(softmax(q kᵀ / √d) v)` over `num_heads` heads, without mask or dropout.
#[derive(Module, Debug)]
pub struct Attention<B: Backend> {
    /// `[internal, embedding_dim]`.
    pub q_proj: Linear<B>,
    /// `[internal, kv_in_dim]`.
    pub k_proj: Linear<B>,
    /// `[internal, kv_in_dim]`.
    pub v_proj: Linear<B>,
    /// `[embedding_dim, internal]`.
    pub out_proj: Linear<B>,
    num_heads: usize,
}

impl AttentionConfig {
    /// Width of the projected queries, keys and values.
    pub fn internal_dim(&self) -> usize {
        self.embedding_dim / self.downsample_rate.max(1)
    }

    /// Builds the layer.
    ///
    /// # Panics
    /// If `num_heads` is 0 or does not divide the internal width (a programming error: SAM2's
    /// architecture is fixed; see `Sam2Config::check` for user-facing checks).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Attention<B> {
        let internal = self.internal_dim();
        assert!(
            self.num_heads > 0 && internal.is_multiple_of(self.num_heads),
            "num_heads ({}) must divide the attention's internal width ({internal})",
            self.num_heads
        );
        let kv_in_dim = self.kv_in_dim.unwrap_or(self.embedding_dim);
        Attention {
            q_proj: LinearConfig::new(self.embedding_dim, internal).init(device),
            k_proj: LinearConfig::new(kv_in_dim, internal).init(device),
            v_proj: LinearConfig::new(kv_in_dim, internal).init(device),
            out_proj: LinearConfig::new(internal, self.embedding_dim).init(device),
            num_heads: self.num_heads,
        }
    }
}

impl<B: Backend> Attention<B> {
    /// q `[B, Nq, E]`, k `[B, Nk, E_kv]`, v `[B, Nk, E_kv]` -> `[B, Nq, E]`
    ///
    /// The heads are columns of the projections' token rows; `segburn_kernels::multi_head_attention`
    /// runs the attention on them (by our kernels on the CPU, by Burn's ops elsewhere).
    pub fn forward(&self, q: Tensor<B, 3>, k: Tensor<B, 3>, v: Tensor<B, 3>) -> Tensor<B, 3> {
        let out = multi_head_attention(
            self.q_proj.forward(q),
            self.k_proj.forward(k),
            self.v_proj.forward(v),
            self.num_heads,
        );
        self.out_proj.forward(out)
    }

    /// Number of heads.
    pub fn num_heads(&self) -> usize {
        self.num_heads
    }
}

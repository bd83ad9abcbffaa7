//! SAM 2's memory attention (`sam2/modeling/memory_attention.py`): the current frame's tokens
//! attend to themselves, then to the memory bank (past frames' memories and object pointers),
//! in a stack of pre-norm transformer layers with rotary position encoding.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{activation::relu, backend::Backend, Tensor};

use super::rope::AxialRope;
use crate::sam2::attention::{Attention, AttentionConfig};
use crate::sam2::layer_norm2d::{LayerNorm, LayerNormConfig};
use crate::sam2::linear::{Linear, LinearConfig};
use crate::sam2::Sam2Error;

/// Configuration of a [`MemoryAttention`] (the official yaml's values by default).
#[derive(Config, Debug)]
pub struct MemoryAttentionConfig {
    /// Width of the current frame's tokens (the image model's `hidden_dim`, 256).
    pub d_model: usize,
    /// Width of the memory tokens (`mem_dim`, 64): the keys and values of the cross-attention.
    pub kv_in_dim: usize,
    /// Layers (4).
    #[config(default = 4)]
    pub num_layers: usize,
    /// Hidden width of each layer's feed-forward block (2048).
    #[config(default = 2048)]
    pub dim_feedforward: usize,
    /// Heads of both attentions (1).
    #[config(default = 1)]
    pub num_heads: usize,
    /// Base of the rotary frequencies.
    #[config(default = 10000.0)]
    pub rope_theta: f64,
    /// Add `0.1 · curr_pos` to the input.
    #[config(default = true)]
    pub pos_enc_at_input: bool,
    /// Add `curr_pos` to the self-attention's queries and keys.
    #[config(default = false)]
    pub pos_enc_at_attn: bool,
    /// Add `memory_pos` to the cross-attention's keys.
    #[config(default = true)]
    pub pos_enc_at_cross_attn_keys: bool,
    /// Add `curr_pos` to the cross-attention's queries.
    #[config(default = false)]
    pub pos_enc_at_cross_attn_queries: bool,
}

/// One layer: self-attention, cross-attention to the memory, feed-forward; each pre-norm with
/// a residual. Dropout (0.1 upstream) is a training-only regulariser and is not applied.
#[derive(Module, Debug)]
pub struct MemoryAttentionLayer<B: Backend> {
    /// Rotary self-attention over the current frame's tokens.
    pub self_attn: Attention<B>,
    /// Rotary cross-attention from the current frame to the memory.
    pub cross_attn_image: Attention<B>,
    /// `d_model -> dim_feedforward`.
    pub linear1: Linear<B>,
    /// `dim_feedforward -> d_model`.
    pub linear2: Linear<B>,
    /// Before the self-attention.
    pub norm1: LayerNorm<B>,
    /// Before the cross-attention.
    pub norm2: LayerNorm<B>,
    /// Before the feed-forward block.
    pub norm3: LayerNorm<B>,
}

/// The layers and a final norm.
#[derive(Module, Debug)]
pub struct MemoryAttention<B: Backend> {
    /// `layers.{i}` in the official state dict.
    pub layers: Vec<MemoryAttentionLayer<B>>,
    /// Applied to the output.
    pub norm: LayerNorm<B>,
    #[module(skip)]
    settings: PositionSettings,
}

/// Where the position encodings enter (fixed by the configuration).
#[derive(Debug, Clone, Copy)]
struct PositionSettings {
    at_input: bool,
    at_attn: bool,
    at_cross_keys: bool,
    at_cross_queries: bool,
    rope_theta: f64,
}

impl MemoryAttentionConfig {
    /// What [`super::VideoMemoryConfig::check`] reports about this part.
    pub(crate) fn check(&self) -> Result<(), String> {
        let heads = self.num_heads;
        if self.num_layers == 0 || self.dim_feedforward == 0 {
            return Err(
                "memory_attention needs at least one layer and a feed-forward width".into(),
            );
        }
        if heads == 0
            || !self.d_model.is_multiple_of(heads)
            || !(self.d_model / heads).is_multiple_of(4)
        {
            return Err(format!(
                "memory_attention: num_heads ({heads}) must divide d_model ({}) into heads whose \
                 width is a multiple of 4 (the rotary encoding's x and y halves of pairs)",
                self.d_model
            ));
        }
        Ok(())
    }

    /// Builds the module with PyTorch-style default initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> MemoryAttention<B> {
        let attention = |kv_in_dim| {
            AttentionConfig::new(self.d_model, self.num_heads)
                .with_kv_in_dim(Some(kv_in_dim))
                .init(device)
        };
        let norm = || LayerNormConfig::new(self.d_model).init(device);
        let layers = (0..self.num_layers)
            .map(|_| MemoryAttentionLayer {
                self_attn: attention(self.d_model),
                cross_attn_image: attention(self.kv_in_dim),
                linear1: LinearConfig::new(self.d_model, self.dim_feedforward).init(device),
                linear2: LinearConfig::new(self.dim_feedforward, self.d_model).init(device),
                norm1: norm(),
                norm2: norm(),
                norm3: norm(),
            })
            .collect();
        MemoryAttention {
            layers,
            norm: norm(),
            settings: PositionSettings {
                at_input: self.pos_enc_at_input,
                at_attn: self.pos_enc_at_attn,
                at_cross_keys: self.pos_enc_at_cross_attn_keys,
                at_cross_queries: self.pos_enc_at_cross_attn_queries,
                rope_theta: self.rope_theta,
            },
        }
    }
}

/// The memory bank a frame attends to, batch first.
#[derive(Debug, Clone)]
pub struct MemoryBank<B: Backend> {
    /// `[B, M, mem_dim]`: the spatial memories of the selected frames, then the object-pointer
    /// tokens.
    pub memory: Tensor<B, 3>,
    /// `[B, M, mem_dim]`: their position encodings (spatial + temporal).
    pub memory_pos: Tensor<B, 3>,
    /// How many tokens at the end of `memory` are object pointers (not rotated).
    pub num_obj_ptr_tokens: usize,
}

impl<B: Backend> MemoryAttention<B> {
    /// `curr`, `curr_pos` `[B, h·w, d_model]` (the current frame's lowest-resolution tokens,
    /// row-major over the `h × w` map) and the memory bank -> `[B, h·w, d_model]`.
    pub fn forward(
        &self,
        curr: Tensor<B, 3>,
        curr_pos: Tensor<B, 3>,
        feature_size: [usize; 2],
        bank: &MemoryBank<B>,
    ) -> Result<Tensor<B, 3>, Sam2Error> {
        let [b, n, c] = curr.dims();
        let [bm, m, _] = bank.memory.dims();
        if bm != b || bank.memory_pos.dims() != bank.memory.dims() || curr_pos.dims() != [b, n, c] {
            return Err(Sam2Error::shape(format!(
                "memory attention: current tokens {:?} (positions {:?}), memory {:?} (positions \
                 {:?}) disagree",
                [b, n, c],
                curr_pos.dims(),
                [bm, m],
                bank.memory_pos.dims()
            )));
        }
        if feature_size[0] * feature_size[1] != n {
            return Err(Sam2Error::shape(format!(
                "memory attention: {n} tokens are not a {feature_size:?} map"
            )));
        }
        let settings = self.settings;
        let heads = self.layers.first().map_or(1, |l| l.self_attn.num_heads());
        let rope = AxialRope::new(
            c / heads,
            settings.rope_theta,
            feature_size,
            curr.dtype(),
            &curr.device(),
        );
        let mut output = if settings.at_input {
            curr + curr_pos.clone() * 0.1
        } else {
            curr
        };
        let keys = if settings.at_cross_keys {
            bank.memory.clone() + bank.memory_pos.clone()
        } else {
            bank.memory.clone()
        };
        for layer in &self.layers {
            // Self-attention.
            let x = layer.norm1.forward(output.clone());
            let q = if settings.at_attn {
                x.clone() + curr_pos.clone()
            } else {
                x.clone()
            };
            output = output
                + layer
                    .self_attn
                    .forward_with_rope(q.clone(), q, x, &rope, 0)?;
            // Cross-attention to the memory.
            let x = layer.norm2.forward(output.clone());
            let q = if settings.at_cross_queries {
                x + curr_pos.clone()
            } else {
                x
            };
            output = output
                + layer.cross_attn_image.forward_with_rope(
                    q,
                    keys.clone(),
                    bank.memory.clone(),
                    &rope,
                    bank.num_obj_ptr_tokens,
                )?;
            // Feed-forward.
            let x = layer.norm3.forward(output.clone());
            output = output + layer.linear2.forward(relu(layer.linear1.forward(x)));
        }
        Ok(self.norm.forward(output))
    }
}

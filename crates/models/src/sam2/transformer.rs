//! The two-way transformer of the mask decoder (`sam2/modeling/sam/transformer.py`).
//!
//! Output tokens (queries) and image tokens (keys) attend to each other in both directions.
//! The blocks are post-norm, and the query position encoding is the *original* token tensor,
//! re-added before every attention of every layer.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::channels_last_tokens;

use super::attention::{Attention, AttentionConfig};
use super::layer_norm2d::{LayerNorm, LayerNormConfig};
use super::mlp::{Mlp, MlpConfig};

/// Configuration of a [`TwoWayTransformer`] (SAM2: depth 2, 256, 8 heads, MLP 2048, rate 2).
#[derive(Config, Debug)]
pub struct TwoWayTransformerConfig {
    /// Number of [`TwoWayAttentionBlock`]s.
    #[config(default = 2)]
    pub depth: usize,
    /// Channels of tokens and image features.
    #[config(default = 256)]
    pub embedding_dim: usize,
    /// Attention heads.
    #[config(default = 8)]
    pub num_heads: usize,
    /// Hidden width of each block's MLP.
    #[config(default = 2048)]
    pub mlp_dim: usize,
    /// Internal width reduction of the cross-attentions.
    #[config(default = 2)]
    pub attention_downsample_rate: usize,
}

/// One block: self-attention, token→image attention, MLP, image→token attention.
#[derive(Module, Debug)]
pub struct TwoWayAttentionBlock<B: Backend> {
    /// Self-attention of the tokens.
    pub self_attn: Attention<B>,
    /// Norm after the self-attention.
    pub norm1: LayerNorm<B>,
    /// Tokens attending to the image.
    pub cross_attn_token_to_image: Attention<B>,
    /// Norm after the token→image attention.
    pub norm2: LayerNorm<B>,
    /// Feed-forward block on the tokens (ReLU).
    pub mlp: Mlp<B>,
    /// Norm after the MLP.
    pub norm3: LayerNorm<B>,
    /// Norm after the image→token attention.
    pub norm4: LayerNorm<B>,
    /// Image tokens attending to the output tokens.
    pub cross_attn_image_to_token: Attention<B>,
    skip_first_layer_pe: bool,
}

/// The two-way transformer.
#[derive(Module, Debug)]
pub struct TwoWayTransformer<B: Backend> {
    /// The attention blocks.
    pub layers: Vec<TwoWayAttentionBlock<B>>,
    /// A last token→image attention.
    pub final_attn_token_to_image: Attention<B>,
    /// Norm after the final attention.
    pub norm_final_attn: LayerNorm<B>,
}

impl TwoWayTransformerConfig {
    /// Builds the transformer; the first block skips the query PE in its self-attention.
    pub fn init<B: Backend>(&self, device: &B::Device) -> TwoWayTransformer<B> {
        let e = self.embedding_dim;
        let cross = || {
            AttentionConfig::new(e, self.num_heads)
                .with_downsample_rate(self.attention_downsample_rate)
                .init(device)
        };
        let norm = || LayerNormConfig::new(e).init(device);
        let layers = (0..self.depth)
            .map(|i| TwoWayAttentionBlock {
                self_attn: AttentionConfig::new(e, self.num_heads).init(device),
                norm1: norm(),
                cross_attn_token_to_image: cross(),
                norm2: norm(),
                mlp: MlpConfig::new(e, self.mlp_dim, e, 2).init(device),
                norm3: norm(),
                norm4: norm(),
                cross_attn_image_to_token: cross(),
                skip_first_layer_pe: i == 0,
            })
            .collect();
        TwoWayTransformer {
            layers,
            final_attn_token_to_image: cross(),
            norm_final_attn: norm(),
        }
    }
}

impl<B: Backend> TwoWayAttentionBlock<B> {
    /// queries `[B, Nt, C]`, keys `[B, HW, C]`, query_pe `[B, Nt, C]`, key_pe `[B, HW, C]`
    /// -> (queries `[B, Nt, C]`, keys `[B, HW, C]`)
    pub fn forward(
        &self,
        queries: Tensor<B, 3>,
        keys: Tensor<B, 3>,
        query_pe: Tensor<B, 3>,
        key_pe: Tensor<B, 3>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>) {
        // Upstream quirk: the first block's self-attention *replaces* the queries (no
        // residual) and uses no position encoding.
        let queries = if self.skip_first_layer_pe {
            self.self_attn
                .forward(queries.clone(), queries.clone(), queries)
        } else {
            let q = queries.clone() + query_pe.clone();
            queries.clone() + self.self_attn.forward(q.clone(), q, queries)
        };
        let queries = self.norm1.forward(queries);

        // Only queries and keys carry the PE; values are the bare tokens.
        let q = queries.clone() + query_pe.clone();
        let k = keys.clone() + key_pe.clone();
        let attended = self
            .cross_attn_token_to_image
            .forward(q, k.clone(), keys.clone());
        let queries = self.norm2.forward(queries + attended);

        let queries = self
            .norm3
            .forward(queries.clone() + self.mlp.forward(queries));

        let q = queries.clone() + query_pe;
        let attended = self
            .cross_attn_image_to_token
            .forward(k, q, queries.clone());
        let keys = self.norm4.forward(keys + attended);
        (queries, keys)
    }
}

impl<B: Backend> TwoWayTransformer<B> {
    /// image_embedding `[B, C, h, w]`, image_pe `[B, C, h, w]`, point_embedding `[B, Nt, C]`
    /// -> (tokens `[B, Nt, C]`, image tokens `[B, h·w, C]`, row-major: index = y·w + x)
    pub fn forward(
        &self,
        image_embedding: Tensor<B, 4>,
        image_pe: Tensor<B, 4>,
        point_embedding: Tensor<B, 3>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>) {
        // Materialised: every attention and PE addition below reads them (see `nn::layout`).
        let mut keys = channels_last_tokens(image_embedding);
        let key_pe = channels_last_tokens(image_pe);
        let mut queries = point_embedding.clone();
        for layer in &self.layers {
            (queries, keys) = layer.forward(queries, keys, point_embedding.clone(), key_pe.clone());
        }
        let q = queries.clone() + point_embedding;
        let k = keys.clone() + key_pe;
        let attended = self.final_attn_token_to_image.forward(q, k, keys.clone());
        let queries = self.norm_final_attn.forward(queries + attended);
        (queries, keys)
    }
}

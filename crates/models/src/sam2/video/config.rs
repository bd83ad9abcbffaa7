//! The configuration of SAM 2.1's video-memory modules: the memory attention, the memory
//! encoder and the tracking settings of `SAM2Base`, with the values of the official
//! `sam2.1_hiera_*.yaml` (the same for all four sizes).

use burn::config::Config;
use burn::module::{Initializer, Param};
use burn::nn::conv::Conv2dConfig;
use burn::tensor::backend::Backend;

use super::memory_attention::MemoryAttentionConfig;
use super::memory_encoder::{MaskDownSamplerConfig, MemoryEncoderConfig};
use crate::sam2::linear::LinearConfig;
use crate::sam2::mlp::MlpConfig;
use crate::sam2::{Sam2, Sam2Error};

/// Everything a [`crate::sam2::Sam2`] needs beyond the image model to track objects through a
/// video.
#[derive(Config, Debug)]
pub struct VideoMemoryConfig {
    /// Cross-attention of the current frame to the memory bank.
    pub memory_attention: MemoryAttentionConfig,
    /// Turns a frame's features and its predicted mask into a memory.
    pub memory_encoder: MemoryEncoderConfig,
    /// Memories a frame can attend to: the prompted frame(s) plus `num_maskmem - 1` previous
    /// frames (7 upstream). `maskmem_tpos_enc` has one row per temporal position.
    #[config(default = 7)]
    pub num_maskmem: usize,
    /// Object pointers from at most this many frames (16 upstream).
    #[config(default = 16)]
    pub max_obj_ptrs_in_encoder: usize,
    /// The predicted mask enters the memory encoder as `sigmoid(logits) · scale + bias`.
    #[config(default = 20.0)]
    pub sigmoid_scale_for_mem_enc: f64,
    /// See `sigmoid_scale_for_mem_enc`.
    #[config(default = -10.0)]
    pub sigmoid_bias_for_mem_enc: f64,
    /// At inference, a mask predicted from clicks enters the memory encoder thresholded (0/1)
    /// instead of as its sigmoid: the official video predictor's setting
    /// (`build_sam2_video_predictor(apply_postprocessing=True)`; `SAM2Base` alone: false).
    #[config(default = true)]
    pub binarize_mask_from_pts_for_mem_enc: bool,
}

impl VideoMemoryConfig {
    /// The official SAM 2.1 video modules around a `hidden_dim`-wide image model (256 for every
    /// official size): 4 memory-attention layers, 64-channel memories, a 4-stage mask
    /// downsampler (3×3 convolutions, stride 2) and a 2-block fuser.
    pub fn sam2_1(hidden_dim: usize) -> Self {
        let mem_dim = 64;
        Self::new(
            MemoryAttentionConfig::new(hidden_dim, mem_dim),
            MemoryEncoderConfig::new(hidden_dim, mem_dim, MaskDownSamplerConfig::new(hidden_dim)),
        )
    }

    /// Channels of a memory (`mem_dim`, the memory encoder's output).
    pub fn mem_dim(&self) -> usize {
        self.memory_encoder.out_dim
    }

    /// Checks that the modules fit each other and an image model of `hidden_dim` channels.
    pub fn check(&self, hidden_dim: usize) -> Result<(), Sam2Error> {
        let fail = |message: String| Err(Sam2Error::Config(format!("video memory: {message}")));
        let attention = &self.memory_attention;
        let encoder = &self.memory_encoder;
        if attention.d_model != hidden_dim || encoder.in_dim != hidden_dim {
            return fail(format!(
                "memory_attention.d_model ({}) and memory_encoder.in_dim ({}) must equal the \
                 image model's width ({hidden_dim})",
                attention.d_model, encoder.in_dim
            ));
        }
        if encoder.mask_downsampler.embed_dim != hidden_dim {
            return fail(format!(
                "memory_encoder.mask_downsampler.embed_dim ({}) must equal {hidden_dim}",
                encoder.mask_downsampler.embed_dim
            ));
        }
        if attention.kv_in_dim != encoder.out_dim {
            return fail(format!(
                "memory_attention.kv_in_dim ({}) must equal memory_encoder.out_dim ({})",
                attention.kv_in_dim, encoder.out_dim
            ));
        }
        let mem_dim = encoder.out_dim;
        if mem_dim == 0 || !hidden_dim.is_multiple_of(mem_dim) {
            // An object pointer (hidden_dim wide) is split into hidden_dim / mem_dim tokens.
            return fail(format!(
                "memory_encoder.out_dim ({mem_dim}) must divide the image model's width \
                 ({hidden_dim})"
            ));
        }
        if self.num_maskmem == 0 {
            return fail("num_maskmem must be at least 1".to_string());
        }
        attention.check().map_err(Sam2Error::Config)?;
        encoder.check().map_err(Sam2Error::Config)?;
        Ok(())
    }
}

impl VideoMemoryConfig {
    /// `model` (built without video parts) with every video module and parameter, initialised
    /// as upstream (truncated normal, std 0.02, for the learned embeddings).
    pub(crate) fn attach<B: Backend>(&self, model: Sam2<B>, device: &B::Device) -> Sam2<B> {
        let c = self.memory_attention.d_model;
        let mem_dim = self.mem_dim();
        let embedding = |shape: Vec<usize>| {
            Initializer::Normal {
                mean: 0.0,
                std: 0.02,
            }
            .init::<B, 1, _>([shape.iter().product::<usize>()], device)
        };
        let param =
            |shape: [usize; 2]| Param::from_tensor(embedding(shape.to_vec()).val().reshape(shape));
        Sam2 {
            memory_attention: Some(self.memory_attention.init(device)),
            memory_encoder: Some(self.memory_encoder.init(device)),
            maskmem_tpos_enc: Some(Param::from_tensor(
                embedding(vec![self.num_maskmem, mem_dim]).val().reshape([
                    self.num_maskmem,
                    1,
                    1,
                    mem_dim,
                ]),
            )),
            no_mem_pos_enc: Some(Param::from_tensor(
                embedding(vec![c]).val().reshape([1, 1, c]),
            )),
            no_obj_ptr: Some(param([1, c])),
            no_obj_embed_spatial: Some(param([1, mem_dim])),
            mask_downsample: Some(
                Conv2dConfig::new([1, 1], [4, 4])
                    .with_stride([4, 4])
                    .init(device),
            ),
            obj_ptr_proj: Some(MlpConfig::new(c, c, c, 3).init(device)),
            obj_ptr_tpos_proj: Some(LinearConfig::new(c, mem_dim).init(device)),
            ..model
        }
    }
}

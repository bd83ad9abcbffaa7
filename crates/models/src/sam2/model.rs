//! The [`Sam2`] model: its image encoder, the image features the heads read, the prompts of a
//! batch, and the forward passes from images (or cached features) to mask logits.

use burn::module::{Module, Param};
use burn::nn::conv::Conv2d;
use burn::tensor::{backend::Backend, Tensor};

use super::linear::Linear;
use super::mlp::Mlp;
use super::video::{MemoryAttention, MemoryEncoder};
use super::{
    BackboneFeatures, DropPath, HieraImageEncoder, HighResFeatures, ImageEncoder, MaskDecoder,
    MaskDecoderInput, MaskDecoderOutput, PointPrompts, PromptEncoder, Sam2Error,
};

/// The image encoder of a [`Sam2`] model. The variant adds nothing to the keys: the weights sit
/// under `image_encoder.*` either way (see [`crate::weights::dotted_path`]).
// One encoder per model: the size of the enum does not matter, and Burn's `Module` derive has no
// `Box` support to shrink it.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum Sam2ImageEncoder<B: Backend> {
    /// Our light CNN.
    Cnn(ImageEncoder<B>),
    /// Hiera + FPN neck.
    Hiera(HieraImageEncoder<B>),
}

impl<B: Backend> Sam2ImageEncoder<B> {
    /// `[N, 3, H, W]` -> the levels at strides 4, 8 and 16.
    pub fn forward(&self, images: Tensor<B, 4>) -> Result<BackboneFeatures<B>, Sam2Error> {
        self.forward_with(images, None)
    }

    /// [`Self::forward`], with stochastic depth in a Hiera trunk when `drop_path` is given
    /// (training; our CNN has none and ignores it).
    pub fn forward_with(
        &self,
        images: Tensor<B, 4>,
        drop_path: Option<&DropPath>,
    ) -> Result<BackboneFeatures<B>, Sam2Error> {
        match self {
            Self::Cnn(encoder) => Ok(encoder.forward(images)),
            Self::Hiera(encoder) => encoder.forward_with(images, drop_path),
        }
    }

    /// Whether this is the Hiera encoder (official weights).
    pub fn is_hiera(&self) -> bool {
        matches!(self, Self::Hiera(_))
    }
}

/// The model; the field names are SAM2Base's, so official keys map one to one.
#[derive(Module, Debug)]
pub struct Sam2<B: Backend> {
    /// The image encoder (absent when training on cached embeddings).
    pub image_encoder: Option<Sam2ImageEncoder<B>>,
    /// `[1, 1, C]`, added to the image embedding of a frame without memory (every single
    /// image). Only SAM 2.1 models (Hiera encoder) have it.
    pub no_mem_embed: Option<Param<Tensor<B, 3>>>,
    /// The prompt encoder.
    pub sam_prompt_encoder: PromptEncoder<B>,
    /// The mask decoder.
    pub sam_mask_decoder: MaskDecoder<B>,
    // The video memory (`None` in an image model; all present or all absent, see
    // `video::VideoMemoryConfig`). Flat, as in the official `SAM2Base`, so keys map one to one.
    /// Cross-attention of a frame to its memories.
    pub memory_attention: Option<MemoryAttention<B>>,
    /// Frame features + predicted mask -> memory.
    pub memory_encoder: Option<MemoryEncoder<B>>,
    /// `[num_maskmem, 1, 1, mem_dim]`: the temporal position of each memory slot.
    pub maskmem_tpos_enc: Option<Param<Tensor<B, 4>>>,
    /// `[1, 1, C]`: the position of the placeholder memory of a frame without memory.
    pub no_mem_pos_enc: Option<Param<Tensor<B, 3>>>,
    /// `[1, C]`: the object pointer of a frame where the object is absent.
    pub no_obj_ptr: Option<Param<Tensor<B, 2>>>,
    /// `[1, mem_dim]`: added to the memory of a frame where the object is absent.
    pub no_obj_embed_spatial: Option<Param<Tensor<B, 2>>>,
    /// `Conv2d(1, 1, 4, stride 4)`: a mask prompt given as the output, down to the decoder's
    /// mask-input size.
    pub mask_downsample: Option<Conv2d<B>>,
    /// 3-layer MLP: the decoder's output token -> the object pointer.
    pub obj_ptr_proj: Option<Mlp<B>>,
    /// `C -> mem_dim`: the temporal encoding of an object pointer.
    pub obj_ptr_tpos_proj: Option<Linear<B>>,
}

impl<B: Backend> Sam2<B> {
    /// A model of the prompt encoder and the mask decoder alone (trained on cached
    /// embeddings): no image encoder, no video memory.
    pub fn from_heads(
        sam_prompt_encoder: PromptEncoder<B>,
        sam_mask_decoder: MaskDecoder<B>,
    ) -> Self {
        Self {
            image_encoder: None,
            no_mem_embed: None,
            sam_prompt_encoder,
            sam_mask_decoder,
            memory_attention: None,
            memory_encoder: None,
            maskmem_tpos_enc: None,
            no_mem_pos_enc: None,
            no_obj_ptr: None,
            no_obj_embed_spatial: None,
            mask_downsample: None,
            obj_ptr_proj: None,
            obj_ptr_tpos_proj: None,
        }
    }
}

/// What the heads read from an image: the embedding and the projected high-res features.
///
/// This is also the layout of cached embeddings (`image_embed`, `feat_s0`, `feat_s1`).
#[derive(Debug, Clone)]
pub struct ImageFeatures<B: Backend> {
    /// `[N, C, h, w]`.
    pub image_embed: Tensor<B, 4>,
    /// Projected by `conv_s0`/`conv_s1`: `[N, C/8, 4h, 4w]`, `[N, C/4, 2h, 2w]`.
    pub high_res: Option<HighResFeatures<B>>,
}

impl<B: Backend> ImageFeatures<B> {
    /// Every level in `dtype`: the decoder then computes in it.
    pub fn cast(self, dtype: impl Into<burn::tensor::DType>) -> Self {
        let dtype = dtype.into();
        Self {
            image_embed: self.image_embed.cast(dtype),
            high_res: self.high_res.map(|h| h.cast(dtype)),
        }
    }
}

/// Prompts for one batch of `B` objects.
#[derive(Debug, Clone, Default)]
pub struct Prompts<B: Backend> {
    /// Clicks (and boxes as points with labels 2, 3, the way SAM2 feeds them).
    pub points: Option<PointPrompts<B>>,
    /// `[B, 4]` boxes, embedded after the points (upstream's `boxes=` argument).
    pub boxes: Option<Tensor<B, 2>>,
    /// `[B, 1, 4h, 4w]` mask logits (e.g. the previous step's low-res prediction).
    pub masks: Option<Tensor<B, 4>>,
}

impl<B: Backend> Sam2<B> {
    /// `[N, 3, H, W]` -> the image embedding and projected high-res features.
    pub fn forward_image(&self, images: Tensor<B, 4>) -> Result<ImageFeatures<B>, Sam2Error> {
        self.forward_image_with(images, None)
    }

    /// [`Self::forward_image`], with stochastic depth in a Hiera trunk when `drop_path` is
    /// given (training).
    pub fn forward_image_with(
        &self,
        images: Tensor<B, 4>,
        drop_path: Option<&DropPath>,
    ) -> Result<ImageFeatures<B>, Sam2Error> {
        let encoder = self
            .image_encoder
            .as_ref()
            .ok_or(Sam2Error::NoImageEncoder)?;
        Ok(self.features_from_backbone(encoder.forward_with(images, drop_path)?))
    }

    /// The heads' view of the encoder's levels: strides 4 and 8 projected by
    /// `conv_s0`/`conv_s1`, `no_mem_embed` added to stride 16. Split from
    /// [`Self::forward_image`] so a frozen encoder can run elsewhere (e.g. without autodiff).
    pub fn features_from_backbone(&self, features: BackboneFeatures<B>) -> ImageFeatures<B> {
        let high_res = self
            .sam_mask_decoder
            .project_high_res(features.stride4, features.stride8);
        let mut image_embed = features.stride16;
        if let Some(no_mem_embed) = &self.no_mem_embed {
            // SAM2Base's `directly_add_no_mem_embed`: the stride-16 map only.
            let [_, _, c] = no_mem_embed.dims();
            let embed = no_mem_embed
                .val()
                .cast(image_embed.dtype())
                .reshape([1, c, 1, 1]);
            image_embed = image_embed + embed;
        }
        ImageFeatures {
            image_embed,
            high_res,
        }
    }

    /// Runs the prompt encoder and the decoder (training semantics; see
    /// [`MaskDecoder::forward_inference`] for the inference-only stability fallback).
    ///
    /// `features` has batch 1 (shared by every prompt set) or `B`.
    pub fn forward_heads(
        &self,
        features: &ImageFeatures<B>,
        prompts: Prompts<B>,
        multimask_output: bool,
    ) -> Result<MaskDecoderOutput<B>, Sam2Error> {
        let input = self.decoder_input(features, prompts)?;
        self.sam_mask_decoder.forward(input, multimask_output)
    }

    /// Embeds the prompts and assembles the decoder input.
    pub fn decoder_input(
        &self,
        features: &ImageFeatures<B>,
        prompts: Prompts<B>,
    ) -> Result<MaskDecoderInput<B>, Sam2Error> {
        // The prompt encoder casts the prompts to its weights' dtype (f32 master weights under
        // mixed precision, where a mask prompt may be a half-precision logit map of the
        // previous step; the model's dtype when it was built in f64, bf16 or f16); the decoder
        // casts the embeddings to the features' dtype.
        let embeddings = self.sam_prompt_encoder.forward(
            prompts.points.as_ref(),
            prompts.boxes,
            prompts.masks,
        )?;
        Ok(MaskDecoderInput {
            image_embeddings: features.image_embed.clone(),
            image_pe: self.sam_prompt_encoder.get_dense_pe(),
            sparse_prompt_embeddings: embeddings.sparse,
            dense_prompt_embeddings: embeddings.dense,
            high_res_features: features.high_res.clone(),
        })
    }
}

/// Bilinear resize of mask logits to `size` with `align_corners=false`, as SAM2Base does to
/// go from the low-res masks to image resolution: `[B, M, h, w] -> [B, M, H, W]`.
/// Through [`crate::nn::resize_bilinear`], so that CPU training uses segburn's kernels.
pub fn upscale_mask_logits<B: Backend>(masks: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 4> {
    crate::nn::resize_bilinear(masks, size)
}

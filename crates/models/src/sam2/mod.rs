//! A SAM2-style promptable segmentation model: prompt encoder, two-way-transformer mask
//! decoder and a light image encoder, ported from `facebookresearch/sam2` (SAM 2: Segment
//! Anything in Images and Videos, <https://arxiv.org/abs/2408.00714>).
//!
//! The heads follow the official code exactly (see `reference/sam2-spec.md`), including its
//! quirks, and every field is named after the official `state_dict` key, so importing an
//! official SAM2/SAM2.1 checkpoint is an identity key mapping (see [`import`]):
//!
//! ```text
//! sam_mask_decoder.iou_prediction_head.layers.0.weight  →  Sam2.sam_mask_decoder.iou_prediction_head.layers[0].weight
//! ```
//!
//! The image encoder is SAM 2.1's Hiera trunk + FPN neck ([`hiera`], [`neck`]; the official
//! checkpoints load as they are) or our own small CNN for quick runs; decoders can also run on
//! cached image embeddings with no encoder at all.
//!
//! ```no_run
//! use burn::backend::{flex::FlexDevice, Flex};
//! use segburn_models::sam2::{HieraSize, Sam2Config, import};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = FlexDevice;
//! let model = Sam2Config::sam2_1_hiera(HieraSize::Small).init::<Flex>(&device);
//! let (model, report) = import::load_official(model, "sam2.1_hiera_small.pt".as_ref(), true)?;
//! println!("{report}");
//! # Ok(()) }
//! ```

pub mod attention;
pub mod hiera;
pub mod hiera_encoder;
pub mod image_encoder;
pub mod import;
pub mod layer_norm2d;
pub mod linear;
pub mod mask_decoder;
mod mask_decoder_io;
pub mod mlp;
pub mod neck;
pub mod official_model;
pub mod position_encoding;
pub mod predictor;
pub mod preprocess;
pub mod prompt_encoder;
pub mod transformer;

pub use hiera::drop_path::DropPath;
pub use hiera::HieraConfig;
pub use hiera_encoder::{HieraImageEncoder, HieraImageEncoderConfig, HieraSize};
pub use image_encoder::{BackboneFeatures, ImageEncoder, ImageEncoderConfig};
pub use mask_decoder::{
    HighResFeatures, MaskDecoder, MaskDecoderConfig, MaskDecoderInput, MaskDecoderOutput,
    MaskPredictions,
};
pub use predictor::{ImagePrediction, PromptSet, Sam2ImagePredictor};
pub use prompt_encoder::{PointPrompts, PromptEmbeddings, PromptEncoder, PromptEncoderConfig};
pub use transformer::TwoWayTransformerConfig;

use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::tensor::{backend::Backend, Tensor};

use crate::weights::WeightsError;

/// Why a SAM2 call could not run.
#[derive(Debug, thiserror::Error)]
pub enum Sam2Error {
    /// A prompt has the wrong shape or the prompts disagree on the batch size.
    #[error("invalid prompt: {0}")]
    Prompt(String),
    /// A feature or embedding tensor has the wrong shape.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// The configuration describes no valid model.
    #[error("invalid SAM2 configuration: {0}")]
    Config(String),
    /// `forward_image` on a model built without an image encoder.
    #[error("this model has no image encoder: use cached image embeddings (image_embed, feat_s0, feat_s1)")]
    NoImageEncoder,
    /// Reading or applying weights failed.
    #[error(transparent)]
    Weights(#[from] WeightsError),
}

impl Sam2Error {
    pub(crate) fn prompt(message: impl Into<String>) -> Self {
        Self::Prompt(message.into())
    }

    pub(crate) fn shape(message: impl Into<String>) -> Self {
        Self::Shape(message.into())
    }
}

/// Configuration of the whole model.
#[derive(Config, Debug)]
pub struct Sam2Config {
    /// The prompt encoder.
    pub prompt_encoder: PromptEncoderConfig,
    /// The mask decoder.
    pub mask_decoder: MaskDecoderConfig,
    /// The image encoder; `None` for decoders trained on cached embeddings.
    #[config(default = "None")]
    pub image_encoder: Option<EncoderConfig>,
}

/// Which image encoder a [`Sam2Config`] builds.
#[derive(Config, Debug)]
pub enum EncoderConfig {
    /// Our light CNN (no official weights; quick runs from scratch).
    Cnn(ImageEncoderConfig),
    /// SAM 2.1's Hiera trunk + FPN neck (official weights), with `no_mem_embed`.
    Hiera(HieraImageEncoderConfig),
}

impl EncoderConfig {
    /// Channels of the encoder's output levels.
    pub fn d_model(&self) -> usize {
        match self {
            Self::Cnn(config) => config.d_model,
            Self::Hiera(config) => config.neck.d_model,
        }
    }

    /// Builds the encoder.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Sam2ImageEncoder<B> {
        match self {
            Self::Cnn(config) => Sam2ImageEncoder::Cnn(config.init(device)),
            Self::Hiera(config) => Sam2ImageEncoder::Hiera(config.init(device)),
        }
    }
}

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

impl Sam2Config {
    /// SAM2.1's heads for square `image_size` inputs (1024 upstream; the embedding is 1/16),
    /// with our image encoder.
    pub fn sam2_1(image_size: usize) -> Self {
        let embedding = image_size / 16;
        Self::new(
            PromptEncoderConfig::new([embedding, embedding], [image_size, image_size]),
            MaskDecoderConfig::new(),
        )
        .with_image_encoder(Some(EncoderConfig::Cnn(ImageEncoderConfig::new())))
    }

    /// An official SAM 2.1 image model (`sam2.1_hiera_*.pt`): 1024×1024 input, Hiera encoder,
    /// and the yaml's dynamic multimask fallback for single-mask predictions.
    pub fn sam2_1_hiera(size: HieraSize) -> Self {
        Self::new(
            PromptEncoderConfig::new([64, 64], [1024, 1024]),
            MaskDecoderConfig::new().with_dynamic_multimask_via_stability(true),
        )
        .with_image_encoder(Some(EncoderConfig::Hiera(
            HieraImageEncoderConfig::official(size),
        )))
    }

    /// Checks the sizes that must agree; configs read from user files should pass this first.
    pub fn check(&self) -> Result<(), Sam2Error> {
        let pe = &self.prompt_encoder;
        let md = &self.mask_decoder;
        let c = md.transformer_dim;
        let fail = |message: String| Err(Sam2Error::Config(message));
        if pe.embed_dim != c {
            return fail(format!(
                "prompt_encoder.embed_dim ({}) must equal mask_decoder.transformer_dim ({c})",
                pe.embed_dim
            ));
        }
        if c == 0 || !c.is_multiple_of(8) {
            return fail(format!(
                "transformer_dim ({c}) must be a positive multiple of 8"
            ));
        }
        let heads = md.transformer.num_heads;
        let rate = md.transformer.attention_downsample_rate.max(1);
        if heads == 0 || !c.is_multiple_of(heads) || !(c / rate).is_multiple_of(heads) {
            return fail(format!(
                "num_heads ({heads}) must divide the attention widths ({c} and {})",
                c / rate
            ));
        }
        if pe.mask_in_chans < 4 || !pe.mask_in_chans.is_multiple_of(4) {
            return fail(format!(
                "mask_in_chans ({}) must be a multiple of 4",
                pe.mask_in_chans
            ));
        }
        let [h, w] = pe.image_embedding_size;
        let [ih, iw] = pe.input_image_size;
        if h == 0 || w == 0 || ih != 16 * h || iw != 16 * w {
            return fail(format!(
                "input_image_size {:?} must be 16 × image_embedding_size {:?}",
                pe.input_image_size, pe.image_embedding_size
            ));
        }
        if let Some(encoder) = &self.image_encoder {
            if encoder.d_model() != c {
                return fail(format!(
                    "image_encoder.d_model ({}) must equal transformer_dim ({c})",
                    encoder.d_model()
                ));
            }
            if let EncoderConfig::Hiera(hiera) = encoder {
                hiera.check()?;
            }
            if !md.use_high_res_features {
                return fail("the image encoder needs use_high_res_features".to_string());
            }
        }
        Ok(())
    }

    /// Builds the model with PyTorch-style default initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Sam2<B> {
        let hiera = matches!(self.image_encoder, Some(EncoderConfig::Hiera(_)));
        let c = self.mask_decoder.transformer_dim;
        Sam2 {
            image_encoder: self.image_encoder.as_ref().map(|c| c.init(device)),
            // Official init: trunc_normal(std=0.02).
            no_mem_embed: hiera.then(|| {
                Initializer::Normal {
                    mean: 0.0,
                    std: 0.02,
                }
                .init([1, 1, c], device)
            }),
            sam_prompt_encoder: self.prompt_encoder.init(device),
            sam_mask_decoder: self.mask_decoder.init(device),
        }
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
        // The prompt encoder runs in f32 (a mask prompt may be a half-precision logit map of
        // the previous step); the decoder casts its embeddings to the features' dtype.
        let embeddings = self.sam_prompt_encoder.forward(
            prompts.points.as_ref(),
            prompts.boxes,
            prompts.masks.map(|m| m.cast(burn::tensor::FloatDType::F32)),
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

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
pub mod automatic;
mod config;
pub mod hiera;
pub mod hiera_encoder;
pub mod image_encoder;
pub mod import;
pub mod layer_norm2d;
pub mod linear;
pub mod mask_decoder;
pub mod mlp;
mod model;
pub mod neck;
pub mod official_model;
pub mod position_encoding;
pub mod predictor;
pub mod preprocess;
pub mod prompt_encoder;
pub mod transformer;
pub mod video;
pub mod video_predictor;

pub use config::{EncoderConfig, Sam2Config};
pub use hiera::drop_path::DropPath;
pub use hiera::HieraConfig;
pub use hiera_encoder::{HieraImageEncoder, HieraImageEncoderConfig, HieraSize};
pub use image_encoder::{BackboneFeatures, ImageEncoder, ImageEncoderConfig};
pub use mask_decoder::{
    HighResFeatures, MaskDecoder, MaskDecoderConfig, MaskDecoderInput, MaskDecoderOutput,
    MaskPredictions,
};
pub use model::{upscale_mask_logits, ImageFeatures, Prompts, Sam2, Sam2ImageEncoder};
pub use predictor::{ImagePrediction, PromptSet, Sam2ImagePredictor};
pub use prompt_encoder::{PointPrompts, PromptEmbeddings, PromptEncoder, PromptEncoderConfig};
pub use transformer::TwoWayTransformerConfig;

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

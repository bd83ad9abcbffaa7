//! Why a SAM2 experiment's `model` or `prompts` section cannot work: each message names the
//! field and the value.

use segburn_models::sam2::Sam2Error;

use crate::engine::TrainError;

/// A value of a SAM2 experiment's `model` or `prompts` section (or their combination with
/// `data`) that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum Sam2ConfigError {
    #[error(
        "model.image_size: {image_size} is not a positive multiple of 16 (the embedding is 1/16)"
    )]
    ImageSize { image_size: usize },
    #[error(
        "model.image_size: {image_size} is not a multiple of {multiple}, which this Hiera trunk \
         needs (its window embedding tiles the stride-4 map and every pooled map has even sides)"
    )]
    HieraImageSize { image_size: usize, multiple: usize },
    #[error("model.freeze_image_encoder: there is no image encoder to freeze")]
    NothingToFreeze,
    #[error("model.image_encoder_lr_mult: must be a positive number, got {0}")]
    EncoderLrMult(f64),
    #[error("model.image_encoder_layer_decay: must be in (0, 1], got {0}")]
    LayerDecay(f64),
    #[error(
        "model.image_encoder_layer_decay: layer-wise decay runs over the blocks of a Hiera \
         trunk, and model.image_encoder is not Hiera"
    )]
    LayerDecayWithoutHiera,
    #[error("model.image_encoder: channels {0:?} must be even and at least 2")]
    CnnChannels([usize; 3]),
    #[error("model.image_encoder.drop_path_rate: {0} must be in [0, 1)")]
    DropPathRate(f64),
    #[error("model.transformer_depth and model.mlp_dim must be at least 1")]
    TransformerSize { depth: usize, mlp_dim: usize },
    /// The model configuration the section builds fails the model's own check.
    #[error("model: {0}")]
    Model(#[source] Sam2Error),
    #[error("prompts.{field}: {value} is not a probability in [0, 1]")]
    PromptProbability { field: &'static str, value: f64 },
    #[error("prompts.{field}: {value} must be finite and ≥ 0")]
    PromptNoise { field: &'static str, value: f64 },
    #[error(
        "model.image_encoder is None and data.embeddings is not set: the decoder needs image \
         features from one of them"
    )]
    NoImageFeatures,
}

impl From<Sam2ConfigError> for TrainError {
    fn from(error: Sam2ConfigError) -> Self {
        TrainError::TaskConfig(Box::new(error))
    }
}

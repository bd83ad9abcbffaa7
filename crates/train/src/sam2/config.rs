//! The `model` section of a SAM2 experiment and the defaults of its `train` section (the
//! engine's shared [`TrainConfig`]). Defaults follow the released SAM2.1 recipe where it applies
//! (AdamW, cosine to a tenth, weight decay 0.1 except norms and biases, gradient clipping at
//! 0.1, seed 123); sizes are ours.

use std::path::PathBuf;

use segburn_models::sam2::{
    MaskDecoderConfig, PromptEncoderConfig, Sam2Config, TwoWayTransformerConfig,
};
use serde::{Deserialize, Serialize};

use super::config_error::Sam2ConfigError;
use super::encoder_config::ImageEncoderChoice;

use crate::engine::{TrainConfig, TrainRecipe};
use crate::optim::{AdamWSettings, LrSchedule, OptimizerConfig, ParamGroupConfig, ParamSelector};

/// The network: SAM2.1's heads (by default exactly, so official checkpoints load) and an
/// image encoder (our CNN, SAM 2.1's Hiera, or none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sam2ModelConfig {
    /// Square input size in pixels, a multiple of 16 (SAM2: 1024). Images are resized to it.
    pub image_size: usize,
    /// `Some((c4, c8, c16))`: our CNN; `Hiera(size: Tiny)`: SAM 2.1's encoder; `None`: no
    /// encoder (cached embeddings). See [`ImageEncoderChoice`].
    pub image_encoder: ImageEncoderChoice,
    /// Keep the encoder's weights fixed: it runs without autodiff (no graph is kept) and the
    /// optimizer does not own its weights.
    pub freeze_image_encoder: bool,
    /// The image encoder's learning rate relative to `train.lr` (SAM 2.1 fine-tuning:
    /// vision_lr 3e-6 / base_lr 5e-6 = 0.6).
    pub image_encoder_lr_mult: f64,
    /// Layer-wise LR decay over the Hiera trunk (SAM 2.1 fine-tuning: 0.9): block k of n gets
    /// `decay^(n − k)`, the patch embedding `decay^(n + 1)`, the position embeddings 1.
    pub image_encoder_layer_decay: Option<f64>,
    /// Masks of objects whose score logit is ≤ 0 become −1024 (SAM2Base's hard gate; no mask
    /// gradient flows for them), in training and evaluation.
    pub gate_masks_by_object_score: bool,
    /// Width of tokens and image embeddings (SAM2: 256).
    pub transformer_dim: usize,
    /// Two-way attention blocks (SAM2: 2).
    pub transformer_depth: usize,
    /// Attention heads (SAM2: 8).
    pub num_heads: usize,
    /// Hidden width of the transformer MLPs (SAM2: 2048).
    pub mlp_dim: usize,
}

impl Default for Sam2ModelConfig {
    fn default() -> Self {
        Self {
            image_size: 1024,
            image_encoder: ImageEncoderChoice::default(),
            freeze_image_encoder: false,
            image_encoder_lr_mult: 1.0,
            image_encoder_layer_decay: None,
            gate_masks_by_object_score: true,
            transformer_dim: 256,
            transformer_depth: 2,
            num_heads: 8,
            mlp_dim: 2048,
        }
    }
}

impl Sam2ModelConfig {
    /// The model's configuration (checked with [`Sam2Config::check`] by the trainer).
    pub fn sam2(&self) -> Sam2Config {
        let embedding = self.image_size / 16;
        let transformer = TwoWayTransformerConfig::new()
            .with_depth(self.transformer_depth)
            .with_embedding_dim(self.transformer_dim)
            .with_num_heads(self.num_heads)
            .with_mlp_dim(self.mlp_dim);
        Sam2Config::new(
            PromptEncoderConfig::new([embedding, embedding], [self.image_size, self.image_size])
                .with_embed_dim(self.transformer_dim),
            MaskDecoderConfig::new()
                .with_transformer_dim(self.transformer_dim)
                .with_transformer(transformer)
                // The SAM 2.1 yaml's inference fallback, with the official encoder.
                .with_dynamic_multimask_via_stability(self.image_encoder.is_hiera()),
        )
        .with_image_encoder(self.image_encoder.encoder_config(self.transformer_dim))
    }

    /// Rejects values that cannot work, naming the field.
    pub fn check(&self) -> Result<(), Sam2ConfigError> {
        if self.image_size < 16 || !self.image_size.is_multiple_of(16) {
            return Err(Sam2ConfigError::ImageSize {
                image_size: self.image_size,
            });
        }
        if self.freeze_image_encoder && self.image_encoder.is_none() {
            return Err(Sam2ConfigError::NothingToFreeze);
        }
        if !(self.image_encoder_lr_mult.is_finite() && self.image_encoder_lr_mult > 0.0) {
            return Err(Sam2ConfigError::EncoderLrMult(self.image_encoder_lr_mult));
        }
        if let Some(decay) = self.image_encoder_layer_decay {
            if !(decay > 0.0 && decay <= 1.0) {
                return Err(Sam2ConfigError::LayerDecay(decay));
            }
        }
        self.image_encoder.check()?;
        if self.transformer_depth == 0 || self.mlp_dim == 0 {
            return Err(Sam2ConfigError::TransformerSize {
                depth: self.transformer_depth,
                mlp_dim: self.mlp_dim,
            });
        }
        self.sam2().check().map_err(Sam2ConfigError::Model)?;
        if let Some(trunk) = self.image_encoder.hiera_trunk() {
            let multiple = trunk.size_multiple();
            if multiple > 0 && !self.image_size.is_multiple_of(multiple) {
                return Err(Sam2ConfigError::HieraImageSize {
                    image_size: self.image_size,
                    multiple,
                });
            }
        }
        Ok(())
    }
}

/// SAM 2.1's fine-tuning recipe: AdamW (betas 0.9 / 0.999, eps 1e-8, weight decay 0.1, none
/// on biases and norms), cosine from `lr` to `lr / 10` with no warm-up, gradient clipping at
/// 0.1, seed 123; 40 epochs at 5e-6 (training from scratch needs a larger `lr`).
#[derive(Debug, Clone, PartialEq)]
pub struct Sam2Recipe;

/// The `train` section of a SAM2 experiment.
pub type Sam2TrainConfig = TrainConfig<Sam2Recipe>;

impl TrainRecipe for Sam2Recipe {
    fn defaults() -> TrainConfig<Self> {
        TrainConfig {
            epochs: 40,
            lr: 5e-6,
            schedule: LrSchedule::Cosine {
                warmup_steps: 0,
                warmup_factor: 0.1,
                min_factor: 0.1,
            },
            // AdamWSettings' own default is SAM 2.1's (weight decay 0.1).
            optimizer: OptimizerConfig::AdamW(AdamWSettings::default()),
            param_groups: vec![ParamGroupConfig {
                select: ParamSelector::NormsAndBiases,
                lr_mult: 1.0,
                weight_decay: Some(0.0),
            }],
            grad_clip_norm: Some(0.1),
            seed: 123,
            run_dir: PathBuf::from("checkpoints/sam2"),
            ..TrainConfig::base()
        }
    }
}

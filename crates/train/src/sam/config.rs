//! The `model` and `train` sections of a SAM2 experiment. Defaults follow the released SAM2.1
//! recipe where it applies (AdamW, cosine to a tenth, weight decay 0.1 except norms and biases,
//! gradient clipping at 0.1, seed 123); sizes are ours.

use std::path::PathBuf;

use segburn_models::sam2::{
    MaskDecoderConfig, PromptEncoderConfig, Sam2Config, TwoWayTransformerConfig,
};
use serde::{Deserialize, Serialize};

use super::encoder_config::ImageEncoderChoice;

use crate::checkpoint::Retention;
use crate::mixed_precision::{LossScalerConfig, Precision};
use crate::optim::{AdamWSettings, OptimizerConfig, ParamGroupConfig, ParamSelector};
use crate::schedule::LrSchedule;

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
            transformer_dim: 256,
            transformer_depth: 2,
            num_heads: 8,
            mlp_dim: 2048,
        }
    }
}

impl Sam2ModelConfig {
    /// The model's configuration (checked with [`Sam2Config::validate`] by the trainer).
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
    pub fn check(&self) -> Result<(), String> {
        if self.image_size < 16 || !self.image_size.is_multiple_of(16) {
            return Err(format!(
                "model.image_size: {} is not a positive multiple of 16 (the embedding is 1/16)",
                self.image_size
            ));
        }
        if self.freeze_image_encoder && self.image_encoder.is_none() {
            return Err("model.freeze_image_encoder: there is no image encoder to freeze".into());
        }
        self.image_encoder.check()?;
        if self.transformer_depth == 0 || self.mlp_dim == 0 {
            return Err("model.transformer_depth and model.mlp_dim must be at least 1".into());
        }
        self.sam2().validate().map_err(|e| format!("model: {e}"))?;
        if let Some(trunk) = self.image_encoder.hiera_trunk() {
            let multiple = trunk.size_multiple();
            if multiple > 0 && !self.image_size.is_multiple_of(multiple) {
                return Err(format!(
                    "model.image_size: {} is not a multiple of {multiple}, which this Hiera trunk \
                     needs (its window embedding tiles the stride-4 map and every pooled map has \
                     even sides)",
                    self.image_size
                ));
            }
        }
        Ok(())
    }
}

/// How a SAM2 run trains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sam2TrainConfig {
    /// Epochs over the training images; with the batches per epoch this sets the schedule.
    pub epochs: u64,
    /// Stop after this many optimizer steps (the schedule keeps its full horizon).
    pub max_steps: Option<u64>,
    /// Base learning rate (SAM2.1 fine-tuning: 5e-6; training from scratch needs more).
    pub lr: f64,
    /// The image encoder's learning rate relative to `lr` (SAM 2.1 fine-tuning: vision_lr
    /// 3e-6 / base_lr 5e-6 = 0.6).
    pub image_encoder_lr_mult: f64,
    /// Layer-wise LR decay over the Hiera trunk (SAM 2.1 fine-tuning: 0.9): block k of n gets
    /// `decay^(n − k)`, the patch embedding `decay^(n + 1)`, the position embeddings 1.
    pub image_encoder_layer_decay: Option<f64>,
    /// SAM2: cosine from `lr` to `lr / 10`, updated every step, no warm-up.
    pub schedule: LrSchedule,
    /// SAM2: AdamW, betas (0.9, 0.999), eps 1e-8, weight decay 0.1.
    pub optimizer: OptimizerConfig,
    /// SAM2: no weight decay on biases and norms.
    pub param_groups: Vec<ParamGroupConfig>,
    /// Compute precision of the encoder and decoder (f32 master weights, layer norms, the
    /// prompt encoder and the losses stay f32). F16 uses the dynamic loss scaler.
    pub precision: Precision,
    pub loss_scaler: LossScalerConfig,
    /// Global gradient-norm clip (SAM2: 0.1).
    pub grad_clip_norm: Option<f64>,
    /// Fixes the image order, flips, object draws and prompts (SAM2: 123).
    pub seed: u64,
    /// Masks of objects whose score logit is ≤ 0 become −1024 (SAM2Base's hard gate; no mask
    /// gradient flows for them).
    pub gate_masks_by_object_score: bool,
    /// Evaluate on the validation split every N steps (also at the end when
    /// `validate_at_end`).
    pub validate_every_steps: Option<u64>,
    pub validate_at_end: bool,
    /// Correction clicks of the evaluation.
    pub eval_corrections: usize,
    /// Save every N steps (and at every epoch end and the end of the run).
    pub checkpoint_every_steps: Option<u64>,
    pub retention: Retention,
    pub log_every_steps: u64,
    /// Where the run writes its log, metrics and checkpoints.
    pub run_dir: PathBuf,
}

impl Default for Sam2TrainConfig {
    fn default() -> Self {
        Self {
            epochs: 40,
            max_steps: None,
            lr: 5e-6,
            image_encoder_lr_mult: 1.0,
            image_encoder_layer_decay: None,
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
            precision: Precision::F32,
            loss_scaler: LossScalerConfig::default(),
            grad_clip_norm: Some(0.1),
            seed: 123,
            gate_masks_by_object_score: true,
            validate_every_steps: None,
            validate_at_end: true,
            eval_corrections: 3,
            checkpoint_every_steps: None,
            retention: Retention::default(),
            log_every_steps: 10,
            run_dir: PathBuf::from("checkpoints/sam2"),
        }
    }
}

impl Sam2TrainConfig {
    /// Rejects values that cannot work, naming the field.
    pub fn check(&self) -> Result<(), String> {
        let fail = |field: &str, why: String| Err(format!("train.{field}: {why}"));
        if self.epochs == 0 {
            return fail("epochs", "must be at least 1".into());
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return fail("lr", format!("must be a positive number, got {}", self.lr));
        }
        if !(self.image_encoder_lr_mult.is_finite() && self.image_encoder_lr_mult > 0.0) {
            return fail(
                "image_encoder_lr_mult",
                format!(
                    "must be a positive number, got {}",
                    self.image_encoder_lr_mult
                ),
            );
        }
        if let Some(decay) = self.image_encoder_layer_decay {
            if !(decay > 0.0 && decay <= 1.0) {
                return fail(
                    "image_encoder_layer_decay",
                    format!("must be in (0, 1], got {decay}"),
                );
            }
        }
        if self.max_steps == Some(0) {
            return fail("max_steps", "must be at least 1 (or None)".into());
        }
        if let Some(clip) = self.grad_clip_norm {
            if !(clip.is_finite() && clip > 0.0) {
                return fail(
                    "grad_clip_norm",
                    format!("must be a positive number, got {clip}"),
                );
            }
        }
        if self.log_every_steps == 0 {
            return fail("log_every_steps", "must be at least 1".into());
        }
        if self.validate_every_steps == Some(0) || self.checkpoint_every_steps == Some(0) {
            return fail(
                "validate_every_steps / checkpoint_every_steps",
                "must be at least 1 (or None)".into(),
            );
        }
        Ok(())
    }
}

//! The `train` section of an experiment: how long, how fast, in what precision, how often to
//! validate and save. Every default is the official PIDNet Cityscapes recipe.

use std::path::PathBuf;

use segburn_data::DataConfig;
use serde::{Deserialize, Serialize};

use super::TrainError;
use crate::checkpoint::Retention;
use crate::loss::PidNetLossConfig;
use crate::mixed_precision::{LossScalerConfig, Precision};
use crate::optim::{OptimizerConfig, ParamGroupConfig};
use crate::schedule::LrSchedule;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Epochs; with the loader's steps per epoch this sets the LR schedule's horizon.
    pub epochs: u64,
    /// Stop after this many optimizer steps (the schedule keeps its full horizon, as the
    /// official CamVid recipe stops at epoch 120 of 200). `None`: run all epochs.
    pub max_steps: Option<u64>,
    /// Micro-batches accumulated per optimizer step; the loss is divided by this.
    pub grad_accum: usize,
    /// Base learning rate.
    pub lr: f64,
    pub schedule: LrSchedule,
    pub optimizer: OptimizerConfig,
    /// Parameter groups with their own LR multiplier / weight decay (official: none).
    pub param_groups: Vec<ParamGroupConfig>,
    pub precision: Precision,
    pub loss_scaler: LossScalerConfig,
    /// Clip the global gradient norm to this value.
    pub grad_clip_norm: Option<f64>,
    /// Seeds the data order and augmentation (official `--seed 304`).
    pub seed: u64,
    /// Validate every N epochs (0: only at the end).
    pub validate_every_epochs: u64,
    /// Also validate every N optimizer steps.
    pub validate_every_steps: Option<u64>,
    /// Validate when training ends.
    pub validate_at_end: bool,
    /// Save every N optimizer steps (a checkpoint is also saved at every epoch end and at the
    /// end of the run).
    pub checkpoint_every_steps: Option<u64>,
    pub retention: Retention,
    /// Log loss terms every N optimizer steps.
    pub log_every_steps: u64,
    /// Where this run writes its log, metrics and checkpoints.
    pub run_dir: PathBuf,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            epochs: 484,
            max_steps: None,
            grad_accum: 1,
            lr: 0.01,
            schedule: LrSchedule::default(),
            optimizer: OptimizerConfig::default(),
            param_groups: Vec::new(),
            precision: Precision::F32,
            loss_scaler: LossScalerConfig::default(),
            grad_clip_norm: None,
            seed: 304,
            validate_every_epochs: 5,
            validate_every_steps: None,
            validate_at_end: true,
            checkpoint_every_steps: None,
            retention: Retention::default(),
            log_every_steps: 10,
            run_dir: PathBuf::from("checkpoints/run"),
        }
    }
}

impl TrainConfig {
    /// Rejects values that cannot work, naming the field.
    pub fn check(&self) -> Result<(), String> {
        let fail = |field: &str, why: &str| Err(format!("train.{field}: {why}"));
        if self.epochs == 0 {
            return fail("epochs", "must be at least 1");
        }
        if self.grad_accum == 0 {
            return fail("grad_accum", "must be at least 1");
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return fail("lr", &format!("must be a positive number, got {}", self.lr));
        }
        if self.max_steps == Some(0) {
            return fail("max_steps", "must be at least 1 (or None)");
        }
        if let Some(clip) = self.grad_clip_norm {
            if !(clip.is_finite() && clip > 0.0) {
                return fail("grad_clip_norm", "must be a positive number");
            }
        }
        if self.log_every_steps == 0 {
            return fail("log_every_steps", "must be at least 1");
        }
        if self.validate_every_steps == Some(0) || self.checkpoint_every_steps == Some(0) {
            return fail(
                "validate_every_steps / checkpoint_every_steps",
                "must be at least 1 (or None)",
            );
        }
        Ok(())
    }
}

/// Computes `FromData` class weights from the pixel counts of the training split (every label
/// is decoded once); other class weights are left as they are. Call it before recording the
/// experiment, so that the run's resolved experiment carries the weights it trains with.
pub fn resolve_class_weights(
    loss: &mut PidNetLossConfig,
    data: &DataConfig,
) -> Result<(), TrainError> {
    if loss.class_weights.needs_data() {
        let counts = segburn_data::class_pixel_counts(data, &data.train_split)?;
        loss.class_weights.compute(&counts)?;
    }
    Ok(())
}

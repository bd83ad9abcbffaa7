//! The `train` section every experiment shares: how long, how fast, in what precision, how
//! often to validate and save, where to write. One struct for both tasks; each task's recipe
//! ([`TrainRecipe`]) supplies the defaults (PIDNet's official Cityscapes recipe, SAM 2.1's
//! fine-tuning recipe), so a partly written section keeps its own task's values.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::checkpoint::Retention;
use crate::mixed_precision::{LossScalerConfig, Precision};
use crate::optim::{LrSchedule, OptimizerConfig, ParamGroupConfig};

/// A task's defaults for the `train` section.
pub trait TrainRecipe: Debug + Clone + PartialEq + Send + Sync + 'static {
    fn defaults() -> TrainConfig<Self>;
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, bound(serialize = "", deserialize = ""))]
pub struct TrainConfig<R: TrainRecipe> {
    /// Epochs; with the loader's steps per epoch this sets the LR schedule's horizon.
    pub epochs: u64,
    /// Stop after this many optimizer steps (the schedule keeps its full horizon, as the
    /// official CamVid recipe stops at epoch 120 of 200). `None`: run all epochs.
    pub max_steps: Option<u64>,
    /// Micro-batches accumulated per optimizer step on each device; each micro-batch's loss
    /// is divided by the step's count.
    pub grad_accum: usize,
    /// Base learning rate.
    pub lr: f64,
    pub schedule: LrSchedule,
    pub optimizer: OptimizerConfig,
    /// Parameter groups with their own LR multiplier / weight decay.
    pub param_groups: Vec<ParamGroupConfig>,
    /// Compute precision (f32 master weights; F16 uses the dynamic loss scaler).
    pub precision: Precision,
    pub loss_scaler: LossScalerConfig,
    /// Clip the global gradient norm to this value.
    pub grad_clip_norm: Option<f64>,
    /// Seeds the initial weights, the data order, augmentation and any per-step draws.
    pub seed: u64,
    /// Validate every N finished epochs (0: not at epoch ends).
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
    /// Which task's defaults fill the fields a file leaves out (not written to files).
    #[serde(skip)]
    #[doc(hidden)]
    pub recipe: PhantomData<R>,
}

impl<R: TrainRecipe> Default for TrainConfig<R> {
    fn default() -> Self {
        R::defaults()
    }
}

impl<R: TrainRecipe> TrainConfig<R> {
    /// The settings no task changes: one micro-batch per step, f32, the default loss scaler,
    /// validation at the end only, keep the last two checkpoints and the best, a log line every
    /// 10 steps. A recipe starts from these and sets its own epochs, learning rate, schedule,
    /// optimizer, seed and run directory (the values here for those are placeholders).
    pub fn base() -> Self {
        Self {
            epochs: 1,
            max_steps: None,
            grad_accum: 1,
            lr: 0.01,
            schedule: LrSchedule::Constant,
            optimizer: OptimizerConfig::default(),
            param_groups: Vec::new(),
            precision: Precision::F32,
            loss_scaler: LossScalerConfig::default(),
            grad_clip_norm: None,
            seed: 0,
            validate_every_epochs: 0,
            validate_every_steps: None,
            validate_at_end: true,
            checkpoint_every_steps: None,
            retention: Retention::default(),
            log_every_steps: 10,
            run_dir: PathBuf::from("checkpoints/run"),
            recipe: PhantomData,
        }
    }

    /// Whether any validation is configured.
    pub fn validates(&self) -> bool {
        self.validate_at_end
            || self.validate_every_epochs > 0
            || self.validate_every_steps.is_some()
    }

    /// Rejects values that cannot work, naming the field.
    pub fn check(&self) -> Result<(), TrainConfigError> {
        use TrainConfigError::{NotPositive, Zero, ZeroOrNone};
        if self.epochs == 0 {
            return Err(Zero { field: "epochs" });
        }
        if self.grad_accum == 0 {
            return Err(Zero {
                field: "grad_accum",
            });
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(NotPositive {
                field: "lr",
                value: self.lr,
            });
        }
        if self.max_steps == Some(0) {
            return Err(ZeroOrNone { field: "max_steps" });
        }
        if let Some(clip) = self.grad_clip_norm {
            if !(clip.is_finite() && clip > 0.0) {
                return Err(NotPositive {
                    field: "grad_clip_norm",
                    value: clip,
                });
            }
        }
        if self.log_every_steps == 0 {
            return Err(Zero {
                field: "log_every_steps",
            });
        }
        if self.validate_every_steps == Some(0) || self.checkpoint_every_steps == Some(0) {
            return Err(ZeroOrNone {
                field: "validate_every_steps / checkpoint_every_steps",
            });
        }
        Ok(())
    }
}

/// A value of the `train` section that cannot work; the message names the field and the value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainConfigError {
    /// A count that must be at least 1 is 0.
    #[error("train.{field}: must be at least 1")]
    Zero { field: &'static str },
    /// An optional count is `Some(0)`.
    #[error("train.{field}: must be at least 1 (or None)")]
    ZeroOrNone { field: &'static str },
    /// A rate or norm is zero, negative or not finite.
    #[error("train.{field}: must be a positive number, got {value}")]
    NotPositive { field: &'static str, value: f64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Short;

    impl TrainRecipe for Short {
        fn defaults() -> TrainConfig<Self> {
            TrainConfig {
                epochs: 3,
                lr: 0.5,
                seed: 7,
                ..TrainConfig::base()
            }
        }
    }

    /// A partly written section takes the recipe's values for what it leaves out.
    #[test]
    fn missing_fields_take_the_recipes_defaults() {
        let config: TrainConfig<Short> = ron::de::from_str("(lr: 0.25)").expect("parses");
        assert_eq!(config.lr, 0.25);
        assert_eq!((config.epochs, config.seed), (3, 7));
        let error = ron::de::from_str::<TrainConfig<Short>>("(recipe: 1)").expect_err("hidden");
        assert!(error.to_string().contains("recipe"), "{error}");
    }

    #[test]
    fn checks_name_the_field() {
        let config = TrainConfig::<Short> {
            grad_accum: 0,
            ..TrainConfig::default()
        };
        assert_eq!(
            config.check().expect_err("invalid").to_string(),
            "train.grad_accum: must be at least 1"
        );
    }
}

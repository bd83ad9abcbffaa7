//! Where a run stands between two optimizer steps (step, epoch, batch within the epoch, seed,
//! loss scaler, best metric): what a checkpoint stores besides tensors, and the rules for
//! continuing from it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::mixed_precision::{LossScaler, LossScalerConfig};

/// Where training stands: everything besides tensors that an exact resume needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Optimizer steps taken.
    pub step: u64,
    /// The epoch the next batch comes from.
    pub epoch: u64,
    /// The next micro-batch's index within that epoch.
    pub batch_in_epoch: usize,
    pub seed: u64,
    pub loss_scaler: LossScaler,
    /// Best validation mIoU so far and the step it was reached at.
    pub best_metric: Option<(f64, u64)>,
    /// `(step, headline metric)` of every validation.
    pub history: Vec<(u64, f64)>,
    /// Micro-batches per optimizer step (`train.grad_accum` × devices) the run trained with:
    /// `batch_in_epoch` counts them, so a resume must keep the number. `None` in checkpoints
    /// written before segburn recorded it.
    #[serde(default)]
    pub micro_batches_per_step: Option<usize>,
}

impl TrainState {
    /// This saved position, for a run that continues it with `seed` and the loss scaler
    /// `scaler` (`scaling`: whether the run's precision uses it). A different seed would
    /// change the data order, so it is refused; when scaling was switched on or off, the
    /// scaler starts afresh.
    pub fn resumed(
        mut self,
        seed: u64,
        scaler: &LossScalerConfig,
        scaling: bool,
        path: &Path,
    ) -> Result<Self, SeedChanged> {
        if self.seed != seed {
            return Err(SeedChanged {
                path: path.to_path_buf(),
                saved: self.seed,
                configured: seed,
            });
        }
        if self.loss_scaler.enabled != scaling {
            self.loss_scaler = LossScaler::new(scaler.clone(), scaling);
        }
        Ok(self)
    }

    /// The log line of a resume from `path`.
    pub fn resumed_message(&self, path: &Path) -> String {
        format!(
            "resumed from {} at step {} (epoch {}, batch {})",
            path.display(),
            self.step,
            self.epoch,
            self.batch_in_epoch
        )
    }
}

/// A resume with another seed than the checkpoint's: the data order would change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{} was trained with seed {saved}, the config says {configured}; the data order would change",
    .path.display()
)]
pub struct SeedChanged {
    /// The checkpoint resumed from.
    pub path: PathBuf,
    /// The seed it was trained with.
    pub saved: u64,
    /// The seed of the resuming run's configuration.
    pub configured: u64,
}

/// The plain state of step `step` of a seed-1 f32 run in its first epoch, as the tests of
/// checkpoint files and their rotation save it.
#[cfg(test)]
pub(crate) fn state_at_step(step: u64) -> TrainState {
    TrainState {
        step,
        epoch: 0,
        batch_in_epoch: step as usize,
        seed: 1,
        loss_scaler: LossScaler::new(LossScalerConfig::default(), false),
        best_metric: None,
        history: Vec::new(),
        micro_batches_per_step: None,
    }
}

/// A position seven steps into a run, as the checkpoint tests save it.
#[cfg(test)]
pub(crate) fn example_state() -> TrainState {
    TrainState {
        step: 7,
        epoch: 1,
        batch_in_epoch: 2,
        seed: 304,
        loss_scaler: LossScaler::new(LossScalerConfig::default(), true),
        best_metric: Some((0.5, 6)),
        history: vec![(6, 0.5)],
        micro_batches_per_step: Some(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_position_checks_the_seed_and_follows_a_precision_change() {
        let path = Path::new("runs/a b/step_7.safetensors");
        let config = LossScalerConfig::default();
        let mut saved = example_state();
        saved.loss_scaler.scale = 1024.0;
        // Same seed, still scaling (F16 → F16): the position and the scale carry over.
        let kept = saved.clone().resumed(304, &config, true, path).unwrap();
        assert_eq!(kept, saved);
        // F16 → F32: the scaler is switched off.
        let f32 = saved.clone().resumed(304, &config, false, path).unwrap();
        assert!(!f32.loss_scaler.enabled);
        assert_eq!(f32.loss_scaler.loss_factor(), 1.0);
        assert_eq!((f32.step, f32.epoch, f32.batch_in_epoch), (7, 1, 2));
        // Another seed would reorder the data.
        let error = saved
            .clone()
            .resumed(305, &config, true, path)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("seed 304") && error.contains("305") && error.contains("a b"),
            "{error}"
        );
        assert_eq!(
            saved.resumed_message(path),
            format!(
                "resumed from {} at step 7 (epoch 1, batch 2)",
                path.display()
            )
        );
    }
}

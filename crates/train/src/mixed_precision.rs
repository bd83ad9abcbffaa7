//! Mixed precision: which dtype the network computes in, and the dynamic loss scaler for f16.
//!
//! Master weights and optimizer state stay in f32. The input batch is cast to the compute dtype,
//! so convolutions and matmuls run in f16/bf16 (the model casts its weights to the input's
//! dtype); BatchNorm statistics and every loss run in f32. f16's narrow range makes small
//! gradients underflow, hence the scaler: the loss is multiplied by `scale` before backward and
//! the gradients divided by it; a step with an inf/NaN gradient is skipped and the scale halved,
//! and after `growth_interval` good steps in a row the scale doubles. bf16 has f32's range and
//! needs no scaling.

use burn::tensor::backend::Backend;
use burn::tensor::{DType, FloatDType};
use serde::{Deserialize, Serialize};

/// The compute precision of the forward and backward passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Precision {
    #[default]
    F32,
    Bf16,
    F16,
}

impl Precision {
    /// The dtype the input batch is cast to.
    pub fn compute_dtype(self) -> FloatDType {
        match self {
            Precision::F32 => FloatDType::F32,
            Precision::Bf16 => FloatDType::BF16,
            Precision::F16 => FloatDType::F16,
        }
    }

    /// Whether the dynamic loss scaler is active.
    pub fn uses_loss_scaling(self) -> bool {
        self == Precision::F16
    }

    /// Whether every device of `B` in `devices` computes in this precision, else the message
    /// naming the device (bf16 on a wgpu adapter, f16 on one without `shader-f16`). Asked
    /// before training, so a run fails at its start instead of in its first kernel.
    pub fn check_supported<B: Backend>(self, devices: &[B::Device]) -> Result<(), String> {
        let dtype = DType::from(self.compute_dtype());
        match devices
            .iter()
            .find(|device| !B::supports_dtype(device, dtype))
        {
            None => Ok(()),
            Some(device) => Err(format!(
                "train.precision {self:?}: device {device:?} ({}) does not compute in {dtype:?}; \
                 use --set train.precision=F32{}",
                B::name(device),
                match self {
                    Precision::Bf16 => " (or F16 where the device supports it)",
                    _ => "",
                }
            )),
        }
    }
}

/// Settings of the dynamic loss scaler (PyTorch `GradScaler`'s defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LossScalerConfig {
    pub initial_scale: f64,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    /// Good steps in a row before the scale grows.
    pub growth_interval: u64,
}

impl Default for LossScalerConfig {
    fn default() -> Self {
        Self {
            initial_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
        }
    }
}

/// The scaler's state; saved in every checkpoint so a resumed run scales identically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossScaler {
    pub scale: f64,
    /// Good steps since the last change of scale.
    pub good_steps: u64,
    /// Steps skipped because of non-finite gradients, over the whole run.
    pub skipped_steps: u64,
    pub enabled: bool,
    pub config: LossScalerConfig,
}

/// What the scaler decided about one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepVerdict {
    /// Apply the optimizer step.
    Apply,
    /// Skip it: the gradients overflowed (the scale was reduced).
    SkipOverflow,
}

impl LossScaler {
    pub fn new(config: LossScalerConfig, enabled: bool) -> Self {
        Self {
            scale: if enabled { config.initial_scale } else { 1.0 },
            good_steps: 0,
            skipped_steps: 0,
            enabled,
            config,
        }
    }

    /// The factor the loss is multiplied by before backward.
    pub fn loss_factor(&self) -> f64 {
        if self.enabled {
            self.scale
        } else {
            1.0
        }
    }

    /// Records whether this step's gradients were finite and says whether to apply it.
    pub fn update(&mut self, gradients_finite: bool) -> StepVerdict {
        if !self.enabled {
            return StepVerdict::Apply;
        }
        if gradients_finite {
            self.good_steps += 1;
            if self.good_steps >= self.config.growth_interval {
                self.scale *= self.config.growth_factor;
                self.good_steps = 0;
            }
            StepVerdict::Apply
        } else {
            self.scale *= self.config.backoff_factor;
            self.good_steps = 0;
            self.skipped_steps += 1;
            StepVerdict::SkipOverflow
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaler(interval: u64) -> LossScaler {
        LossScaler::new(
            LossScalerConfig {
                growth_interval: interval,
                ..LossScalerConfig::default()
            },
            true,
        )
    }

    #[test]
    fn overflow_halves_the_scale_and_skips_exactly_that_step() {
        let mut s = scaler(2000);
        assert_eq!(s.loss_factor(), 65536.0);
        assert_eq!(s.update(true), StepVerdict::Apply);
        assert_eq!(s.update(false), StepVerdict::SkipOverflow);
        assert_eq!(s.scale, 32768.0);
        assert_eq!(s.skipped_steps, 1);
        assert_eq!(s.good_steps, 0);
        assert_eq!(s.update(true), StepVerdict::Apply);
        assert_eq!(s.skipped_steps, 1);
    }

    #[test]
    fn scale_doubles_after_a_run_of_good_steps() {
        let mut s = scaler(3);
        for _ in 0..2 {
            s.update(true);
        }
        assert_eq!(s.scale, 65536.0);
        s.update(true);
        assert_eq!(s.scale, 131072.0);
        assert_eq!(s.good_steps, 0);
        // An overflow in the middle of a run restarts the count.
        s.update(true);
        s.update(false);
        s.update(true);
        s.update(true);
        assert_eq!(s.scale, 65536.0);
    }

    #[test]
    fn disabled_scaler_is_transparent() {
        let mut s = LossScaler::new(LossScalerConfig::default(), false);
        assert_eq!(s.loss_factor(), 1.0);
        assert_eq!(s.update(false), StepVerdict::Apply);
        assert_eq!(s.skipped_steps, 0);
    }
}

//! The training augmentation of the official recipe and the normalisation validation shares.

use serde::{Deserialize, Serialize};

use crate::error::DataError;

/// The official training augmentation: random scale, pad, random crop, flip, normalisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AugmentConfig {
    /// Long side, in pixels, of an image at scale 1.0 (official `BASE_SIZE`).
    pub base_size: usize,
    /// Crop height (official `IMAGE_SIZE[1]`).
    pub crop_height: usize,
    /// Crop width (official `IMAGE_SIZE[0]`).
    pub crop_width: usize,
    /// Random scaling (official `MULTI_SCALE`). Without it images keep their size.
    pub multi_scale: bool,
    /// The smallest scale factor.
    pub scale_min: f64,
    /// The spacing of the scale factors.
    pub scale_step: f64,
    /// How many scale factors: `scale_min + k * scale_step` for `k` in `0..scale_steps`, drawn
    /// uniformly. The official `0.5 + random.randint(0, 16) / 10` is 17 steps (0.5 ..= 2.1):
    /// Python's `randint` includes its upper bound.
    pub scale_steps: u32,
    /// Horizontal flip with probability 0.5 (official `FLIP`).
    pub flip: bool,
    /// Per-channel mean of RGB values in `[0, 1]` (ImageNet), also used for validation.
    pub mean: [f32; 3],
    /// Per-channel standard deviation (ImageNet), also used for validation.
    pub std: [f32; 3],
}

impl Default for AugmentConfig {
    fn default() -> Self {
        Self {
            base_size: 2048,
            crop_height: 1024,
            crop_width: 1024,
            multi_scale: true,
            scale_min: 0.5,
            scale_step: 0.1,
            scale_steps: 17,
            flip: true,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
        }
    }
}

impl AugmentConfig {
    pub(super) fn check(&self) -> Result<(), DataError> {
        let positive = [
            ("augment.base_size", self.base_size),
            ("augment.crop_height", self.crop_height),
            ("augment.crop_width", self.crop_width),
            ("augment.scale_steps", self.scale_steps as usize),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(DataError::config(field, "must be at least 1"));
            }
        }
        if !(self.scale_min.is_finite() && self.scale_min > 0.0) {
            return Err(DataError::config(
                "augment.scale_min",
                format!("{} is not a positive scale", self.scale_min),
            ));
        }
        if !(self.scale_step.is_finite() && self.scale_step >= 0.0) {
            return Err(DataError::config(
                "augment.scale_step",
                format!("{} is not a finite, non-negative step", self.scale_step),
            ));
        }
        for (channel, std) in self.std.iter().enumerate() {
            if !(std.is_finite() && *std > 0.0) {
                return Err(DataError::config(
                    format!("augment.std[{channel}]"),
                    format!("{std} is not a positive standard deviation"),
                ));
            }
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            return Err(DataError::config("augment.mean", "values must be finite"));
        }
        Ok(())
    }

    /// Scale factor number `k` (`k < scale_steps`), computed in f64 exactly as Python does
    /// `0.5 + k / 10.0` for the defaults.
    pub fn scale(&self, k: u32) -> f64 {
        if self.scale_step == 0.1 {
            // Division by 10 rather than multiplication by 0.1 keeps the bits of the official
            // `k / 10.0`, so `int(2048 * s + 0.5)` rounds the same way.
            self.scale_min + f64::from(k) / 10.0
        } else {
            self.scale_min + f64::from(k) * self.scale_step
        }
    }
}

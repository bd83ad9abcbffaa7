//! How a prediction is made: window mode, scales, flip, precision.

use serde::{Deserialize, Serialize};

use super::error::InferenceError;
use crate::mixed_precision::Precision;

/// Whole image or sliding window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum InferenceMode {
    /// The whole image in one pass (the official evaluation).
    #[default]
    Whole,
    /// Windows of `crop` = `[height, width]` every `stride` = `[height, width]` pixels; the
    /// logits of overlapping windows are averaged.
    Slide {
        crop: [usize; 2],
        stride: [usize; 2],
    },
}

/// Window mode, test-time augmentation and compute precision of a prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InferenceConfig {
    pub mode: InferenceMode,
    /// Input scales; the logits of all scales are resized back and averaged. `[1.0]` = single
    /// scale.
    pub scales: Vec<f64>,
    /// Also run the horizontally flipped image and average.
    pub flip: bool,
    /// The dtype the network runs in; logits are averaged and upsampled in f32.
    pub precision: Precision,
}

impl Default for InferenceConfig {
    /// The official evaluation: whole image, scale 1, no flip, f32.
    fn default() -> Self {
        Self {
            mode: InferenceMode::Whole,
            scales: vec![1.0],
            flip: false,
            precision: Precision::F32,
        }
    }
}

impl InferenceConfig {
    /// The official evaluation in `precision`.
    pub fn whole(precision: Precision) -> Self {
        Self {
            precision,
            ..Self::default()
        }
    }

    /// Rejects settings that cannot work, naming them.
    pub fn check(&self) -> Result<(), InferenceError> {
        if self.scales.is_empty() {
            return Err(InferenceError::Config(
                "scales: give at least one scale, e.g. 1.0".into(),
            ));
        }
        if let Some(bad) = self.scales.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(InferenceError::Config(format!(
                "scales: {bad} is not a positive number"
            )));
        }
        if let InferenceMode::Slide { crop, stride } = &self.mode {
            if crop.contains(&0) {
                return Err(InferenceError::Config(format!(
                    "slide crop {}x{}: both sides must be at least 1",
                    crop[0], crop[1]
                )));
            }
            if stride.contains(&0) || stride[0] > crop[0] || stride[1] > crop[1] {
                return Err(InferenceError::Config(format!(
                    "slide stride {}x{} with crop {}x{}: the stride must be between 1 and the crop \
                     size, or pixels between windows would get no prediction",
                    stride[0], stride[1], crop[0], crop[1]
                )));
            }
        }
        Ok(())
    }

    /// A short description, e.g. `slide 512x1024 stride 256x512, scales [0.5, 1], flip, F32`.
    pub fn describe(&self) -> String {
        let mode = match &self.mode {
            InferenceMode::Whole => "whole image".to_string(),
            InferenceMode::Slide { crop, stride } => format!(
                "slide {}x{} stride {}x{}",
                crop[0], crop[1], stride[0], stride[1]
            ),
        };
        let scales: Vec<String> = self.scales.iter().map(|s| format!("{s}")).collect();
        format!(
            "{mode}, scales [{}]{}, {:?}",
            scales.join(", "),
            if self.flip { ", flip" } else { "" },
            self.precision
        )
    }
}

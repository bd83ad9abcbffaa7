//! The settings of "segment everything", with upstream's names and defaults.

use burn::config::Config;

use crate::sam2::Sam2Error;

/// Settings of [`super::AutomaticMaskGenerator`], named and defaulted as the official
/// `SAM2AutomaticMaskGenerator` (defaults chosen upstream for SAM 2 with a Hiera-L backbone).
#[derive(Config, Debug)]
pub struct AutomaticMaskGeneratorConfig {
    /// Clicks along one side of each crop; `points_per_side²` in all.
    #[config(default = 32)]
    pub points_per_side: usize,
    /// Clicks run through the decoder together (memory against speed; results do not change).
    #[config(default = 64)]
    pub points_per_batch: usize,
    /// Keep masks whose predicted IoU is strictly above this (0 turns the filter off).
    #[config(default = 0.8)]
    pub pred_iou_thresh: f64,
    /// Keep masks whose stability score is at least this (0 turns the filter off).
    #[config(default = 0.95)]
    pub stability_score_thresh: f64,
    /// How far the logit cutoff moves either way for the stability score.
    #[config(default = 1.0)]
    pub stability_score_offset: f64,
    /// Logit cutoff that binarises the masks.
    #[config(default = 0.0)]
    pub mask_threshold: f64,
    /// Box IoU above which NMS drops a duplicate within one crop.
    #[config(default = 0.7)]
    pub box_nms_thresh: f64,
    /// Crop layers on top of the whole image; layer `i` has `2^i × 2^i` crops.
    #[config(default = 0)]
    pub crop_n_layers: usize,
    /// Box IoU above which NMS drops a duplicate between crops (smaller crops win).
    #[config(default = 0.7)]
    pub crop_nms_thresh: f64,
    /// Overlap of neighbouring layer-1 crops, as a fraction of the image's short side.
    #[config(default = "512.0 / 1500.0")]
    pub crop_overlap_ratio: f64,
    /// Layer `i` gets `points_per_side / factor^i` clicks a side.
    #[config(default = 1)]
    pub crop_n_points_downscale_factor: usize,
    /// When above 0, holes and islands of at most this many low-resolution (S/4) pixels are
    /// removed from every mask's logits before upscaling, as upstream's predictor does with
    /// its CUDA extension (without it upstream skips the step with a warning).
    #[config(default = 0)]
    pub min_mask_region_area: usize,
    /// Three masks per click instead of one.
    #[config(default = true)]
    pub multimask_output: bool,
    /// Refine every mask once with its own low-resolution logits as a mask prompt.
    #[config(default = false)]
    pub use_m2m: bool,
}

impl AutomaticMaskGeneratorConfig {
    /// Refuses settings the generator cannot run, naming the field and its value.
    pub fn validate(&self) -> Result<(), Sam2Error> {
        let invalid = |field: &str, value: String, why: &str| {
            Err(Sam2Error::Config(format!(
                "automatic mask generator: {field} = {value} {why}"
            )))
        };
        if self.points_per_side == 0 {
            return invalid("points_per_side", "0".into(), "gives no clicks");
        }
        if self.points_per_batch == 0 {
            return invalid("points_per_batch", "0".into(), "gives empty batches");
        }
        if self.crop_n_points_downscale_factor == 0 {
            return invalid(
                "crop_n_points_downscale_factor",
                "0".into(),
                "divides by zero",
            );
        }
        if self.crop_n_layers > 0 {
            let last = self.points_per_side
                / self
                    .crop_n_points_downscale_factor
                    .saturating_pow(self.crop_n_layers as u32);
            if last == 0 {
                return invalid(
                    "crop_n_layers",
                    self.crop_n_layers.to_string(),
                    "leaves the last layer with no clicks (lower it or crop_n_points_downscale_factor)",
                );
            }
        }
        if !(0.0..1.0).contains(&self.crop_overlap_ratio) {
            return invalid(
                "crop_overlap_ratio",
                self.crop_overlap_ratio.to_string(),
                "is outside [0, 1)",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams() {
        let config = AutomaticMaskGeneratorConfig::new();
        assert_eq!(config.points_per_side, 32);
        assert_eq!(config.points_per_batch, 64);
        assert_eq!(config.pred_iou_thresh, 0.8);
        assert_eq!(config.stability_score_thresh, 0.95);
        assert_eq!(config.stability_score_offset, 1.0);
        assert_eq!(config.mask_threshold, 0.0);
        assert_eq!(config.box_nms_thresh, 0.7);
        assert_eq!(config.crop_n_layers, 0);
        assert_eq!(config.crop_nms_thresh, 0.7);
        assert_eq!(config.crop_overlap_ratio, 512.0 / 1500.0);
        assert_eq!(config.crop_n_points_downscale_factor, 1);
        assert_eq!(config.min_mask_region_area, 0);
        assert!(config.multimask_output);
        assert!(!config.use_m2m);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn bad_settings_name_the_field() {
        let message = |config: AutomaticMaskGeneratorConfig| {
            config.validate().expect_err("invalid").to_string()
        };
        let base = AutomaticMaskGeneratorConfig::new;
        assert!(message(base().with_points_per_side(0)).contains("points_per_side = 0"));
        assert!(base().with_min_mask_region_area(100).validate().is_ok());
        assert!(message(
            base()
                .with_crop_n_layers(6)
                .with_crop_n_points_downscale_factor(2)
        )
        .contains("crop_n_layers = 6"));
        assert!(message(base().with_crop_overlap_ratio(1.5)).contains("crop_overlap_ratio"));
    }
}

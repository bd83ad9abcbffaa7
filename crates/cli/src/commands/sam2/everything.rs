//! `predict-sam2 --everything`: "segment everything" with
//! [`segburn_models::sam2::automatic::AutomaticMaskGenerator`] instead of prompts. The options
//! are the official generator's, with its defaults; the files are
//! [`crate::commands::sam2::everything_output`]'s.

use std::path::Path;

use burn::tensor::backend::Backend;
use segburn_data::decode::RgbImage;
use segburn_models::sam2::automatic::{AutomaticMaskGenerator, AutomaticMaskGeneratorConfig};
use segburn_models::sam2::Sam2;

use crate::commands::sam2::everything_output::write_everything;

/// The generator's options (`SAM2AutomaticMaskGenerator`'s names and defaults).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct EverythingArgs {
    /// Segment everything: a grid of clicks over the image instead of --points / --box.
    #[arg(long)]
    pub everything: bool,
    /// Clicks along each side of the image (and of each crop).
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub points_per_side: usize,
    /// Clicks decoded together (memory against speed; the masks do not change).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub points_per_batch: usize,
    /// Keep masks whose predicted IoU is above this.
    #[arg(long, default_value_t = 0.8, value_name = "X")]
    pub pred_iou_thresh: f64,
    /// Keep masks whose stability score is at least this.
    #[arg(long, default_value_t = 0.95, value_name = "X")]
    pub stability_score_thresh: f64,
    /// Box IoU above which a duplicate mask is dropped.
    #[arg(long, default_value_t = 0.7, value_name = "X")]
    pub box_nms_thresh: f64,
    /// Crop layers on top of the whole image (layer i has 2^i × 2^i crops).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub crop_n_layers: usize,
    /// Remove holes and islands of at most this many low-resolution pixels (0: off).
    #[arg(long, default_value_t = 0, value_name = "PIXELS")]
    pub min_mask_region_area: usize,
    /// Refine every mask once with its own logits as a mask prompt.
    #[arg(long)]
    pub use_m2m: bool,
}

impl EverythingArgs {
    /// The generator's configuration (the options not exposed keep the official defaults).
    pub fn config(&self) -> AutomaticMaskGeneratorConfig {
        AutomaticMaskGeneratorConfig::new()
            .with_points_per_side(self.points_per_side)
            .with_points_per_batch(self.points_per_batch)
            .with_pred_iou_thresh(self.pred_iou_thresh)
            .with_stability_score_thresh(self.stability_score_thresh)
            .with_box_nms_thresh(self.box_nms_thresh)
            .with_crop_n_layers(self.crop_n_layers)
            .with_min_mask_region_area(self.min_mask_region_area)
            .with_use_m2m(self.use_m2m)
    }
}

/// Runs the generator of `args` with `model` on `image` (read from `image_path`), writes the
/// files into `out` and prints where they are.
pub fn segment_everything<B: Backend>(
    model: &Sam2<B>,
    args: &EverythingArgs,
    image: &RgbImage,
    image_path: &Path,
    out: &Path,
    device: &B::Device,
) -> anyhow::Result<()> {
    let generator = AutomaticMaskGenerator::new(model, args.config())?;
    let records = generator.generate(&image.pixels, [image.height, image.width], device)?;
    let files = write_everything(out, image_path, image, &records)?;
    println!(
        "{} masks\noverlay {}\nmasks {}\nrecords {}",
        records.len(),
        files.overlay.display(),
        files.masks.display(),
        files.records.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Command {
        #[command(flatten)]
        everything: EverythingArgs,
    }

    #[test]
    fn defaults_are_the_official_ones_and_options_reach_the_config() {
        let defaults = Command::parse_from(["predict-sam2"]).everything;
        assert!(!defaults.everything);
        let config = defaults.config();
        let official = AutomaticMaskGeneratorConfig::new();
        assert_eq!(config.points_per_side, official.points_per_side);
        assert_eq!(config.pred_iou_thresh, official.pred_iou_thresh);
        assert_eq!(
            config.stability_score_thresh,
            official.stability_score_thresh
        );
        assert_eq!(config.box_nms_thresh, official.box_nms_thresh);
        let set = Command::parse_from([
            "predict-sam2",
            "--everything",
            "--points-per-side",
            "16",
            "--crop-n-layers",
            "1",
            "--min-mask-region-area",
            "25",
            "--use-m2m",
        ])
        .everything;
        assert!(set.everything);
        let config = set.config();
        assert_eq!(config.points_per_side, 16);
        assert_eq!(config.crop_n_layers, 1);
        assert_eq!(config.min_mask_region_area, 25);
        assert!(config.use_m2m);
    }
}

//! SAM 2.1 at its real size (`bench --workloads sam2-real`), beside scripts/torch_sam2_real.py:
//!
//! * prompt encoder + mask decoder on ONE 64×64 image embedding (1024² input, high-res features
//!   `[1,32,256,256]` / `[1,64,128,128]`), `P` objects of one foreground click each, multimask,
//!   by the calls "segment everything" makes per batch (`Sam2::decoder_input` +
//!   `forward_inference`, the embedding shared by the `P` objects); no click mapping and no
//!   upscale to the image (the everything row has them). Random weights;
//! * one [`AutomaticMaskGenerator::generate`] at the official defaults (32×32 clicks in batches
//!   of 64) on a 1024² RGB image with SAM 2.1 Hiera-T: preprocessing, encoder, decoder batches,
//!   upscaling, filters, NMS and RLE. The model and image are files the PyTorch side wrote
//!   (the same weights and pixels on both sides); without them, random weights and a gradient.

use std::path::Path;

use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use segburn_models::sam2::automatic::grid::point_grid;
use segburn_models::sam2::automatic::{AutomaticMaskGenerator, AutomaticMaskGeneratorConfig};
use segburn_models::sam2::import::read_checkpoint;
use segburn_models::sam2::official_model::image_model_from_checkpoint;
use segburn_models::sam2::{
    HieraSize, HighResFeatures, ImageFeatures, MaskDecoderConfig, PointPrompts,
    PromptEncoderConfig, Prompts, Sam2Config,
};

use super::pidnet_precision::Repeats;
use super::timing::{measure, Timing};

/// The official input side.
pub const SAM2_REAL_SIDE: usize = 1024;
/// Clicks along each side of the everything grid (the official default).
const EVERYTHING_POINTS_PER_SIDE: usize = 32;

/// The grid's clicks per side at input `side`: 4 below the official size (smoke runs).
fn points_per_side(side: usize) -> usize {
    if side < SAM2_REAL_SIDE {
        4
    } else {
        EVERYTHING_POINTS_PER_SIDE
    }
}

/// The first `count` clicks of the generator's `points_per_side`-grid over a `side`-pixel
/// square, row by row, as `x, y` pairs.
fn grid_clicks(count: usize, points_per_side: usize, side: usize) -> Vec<f32> {
    point_grid(points_per_side)
        .into_iter()
        .take(count)
        .flat_map(|[x, y]| [(x * side as f64) as f32, (y * side as f64) as f32])
        .collect()
}

/// Prompt encoder + decoder for `prompts` one-click objects on one `side / 16` embedding.
pub fn sam2_real_decoder<B: Backend>(
    prompts: usize,
    side: usize,
    device: &B::Device,
    repeats: Repeats,
) -> Result<Timing, String> {
    let e = side / 16;
    let model = Sam2Config::new(
        PromptEncoderConfig::new([e, e], [side, side]),
        MaskDecoderConfig::new(),
    )
    .init::<B>(device);
    let random =
        |shape: [usize; 4]| Tensor::<B, 4>::random(shape, Distribution::Normal(0.0, 1.0), device);
    // One image's features (batch 1), as the predictor holds them.
    let features = ImageFeatures {
        image_embed: random([1, 256, e, e]),
        high_res: Some(HighResFeatures {
            feat_s0: random([1, 32, 4 * e, 4 * e]),
            feat_s1: random([1, 64, 2 * e, 2 * e]),
        }),
    };
    let clicks = grid_clicks(prompts, EVERYTHING_POINTS_PER_SIDE, side);
    let points = PointPrompts {
        coords: Tensor::from_data(TensorData::new(clicks, [prompts, 1, 2]), device),
        labels: Tensor::<B, 2, Int>::ones([prompts, 1], device),
    };
    let mut failure = None;
    let timing = measure(repeats.warmups, repeats.reps, || {
        // Sam2ImagePredictor::predict's calls: prompts embedded, decoder on the shared embedding.
        let prompts = Prompts {
            points: Some(points.clone()),
            boxes: None,
            masks: None,
        };
        let output = model
            .decoder_input(&features, prompts)
            .and_then(|input| model.sam_mask_decoder.forward_inference(input, true));
        match output {
            // Reading one value waits for the whole computation.
            Ok(output) => drop(output.masks.slice([0..1, 0..1, 0..1, 0..1]).into_data()),
            Err(e) => failure = Some(e.to_string()),
        }
    });
    failure.map_or(Ok(timing), Err)
}

/// The everything row's model and image: files, or (`None`) random weights and a gradient.
pub struct EverythingInputs<'a> {
    pub checkpoint: Option<&'a Path>,
    pub image: Option<&'a Path>,
}

/// One "segment everything" pass per run; also returns how many masks the last pass kept.
/// `side` < 1024 (smoke runs) shrinks the random model's input and the grid to 4×4.
pub fn sam2_everything<B: Backend>(
    inputs: &EverythingInputs,
    side: usize,
    device: &B::Device,
    repeats: Repeats,
) -> Result<(Timing, usize), String> {
    let model = match inputs.checkpoint {
        Some(path) => {
            let tensors = read_checkpoint(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let name = path.display().to_string();
            image_model_from_checkpoint::<B>(&tensors, None, &name, device)
                .map_err(|e| e.to_string())?
                .model
        }
        None => {
            let mut config = Sam2Config::sam2_1_hiera(HieraSize::Tiny);
            config.prompt_encoder = PromptEncoderConfig::new([side / 16, side / 16], [side, side]);
            config.init::<B>(device)
        }
    };
    let (pixels, size) = match inputs.image {
        Some(path) => {
            let image = segburn_data::decode::read_image(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            (image.pixels, [image.height, image.width])
        }
        None => (gradient(side), [side, side]),
    };
    // The official defaults otherwise (points_per_batch 64, IoU 0.8, stability 0.95, NMS 0.7).
    let config = AutomaticMaskGeneratorConfig::new().with_points_per_side(points_per_side(side));
    let generator = AutomaticMaskGenerator::new(&model, config).map_err(|e| e.to_string())?;
    let mut kept = 0;
    let mut failure = None;
    let timing = measure(repeats.warmups, repeats.reps, || {
        match generator.generate(&pixels, size, device) {
            Ok(records) => kept = records.len(),
            Err(e) => failure = Some(e.to_string()),
        }
    });
    failure.map_or(Ok((timing, kept)), Err)
}

/// A `side`² RGB gradient (row-major, 3 bytes a pixel).
fn gradient(side: usize) -> Vec<u8> {
    (0..side * side)
        .flat_map(|i| {
            let (y, x) = (i / side, i % side);
            [(x * 255 / side) as u8, (y * 255 / side) as u8, 128]
        })
        .collect()
}

/// Clicks × masks per click the pass decodes (multimask: 3), whatever the weights.
pub fn everything_candidates(side: usize) -> usize {
    points_per_side(side).pow(2) * 3
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;

    use super::*;

    #[test]
    fn the_grid_is_upstreams_row_by_row() {
        assert_eq!(
            grid_clicks(3, 32, 1024),
            [16.0, 16.0, 48.0, 16.0, 80.0, 16.0]
        );
        assert_eq!(grid_clicks(33, 32, 1024)[64..], [16.0, 48.0]);
    }

    #[test]
    fn decoder_and_everything_run_once_at_64_pixels() {
        let device = Default::default();
        let once = Repeats {
            warmups: 0,
            reps: 1,
        };
        for prompts in [1, 3] {
            let timing = sam2_real_decoder::<Flex>(prompts, 64, &device, once);
            assert!(timing.expect("decoder").median_ms > 0.0);
        }
        let inputs = EverythingInputs {
            checkpoint: None,
            image: None,
        };
        let (timing, _) = sam2_everything::<Flex>(&inputs, 64, &device, once).expect("pass");
        assert!(timing.median_ms > 0.0);
        assert_eq!(everything_candidates(64), 48);
    }
}

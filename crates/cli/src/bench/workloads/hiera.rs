//! SAM 2.1 image-model workloads at the official input size, 1×3×1024×1024, with random
//! weights (speed does not depend on their values) (`bench --workloads hiera`):
//!
//! * encoder forward: the Hiera trunk + FPN neck, no autodiff (what `predict-sam2` pays per
//!   photo, before the heads);
//! * fine-tuning step, batch 1: encoder → `no_mem_embed` and `conv_s0`/`conv_s1` → prompt
//!   encoder (two clicks and a box) + mask decoder (multimask) → bilinear 256→1024 → the SAM2
//!   loss → backward → AdamW step, with the encoder **frozen** (it runs without autodiff and its
//!   levels enter the graph as constants, so no activation of it is kept) or **trainable**.

use burn::module::AutodiffModule;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor};
use segburn_models::sam2::{
    upscale_mask_logits, BackboneFeatures, HieraSize, PointPrompts, PromptEncoderConfig, Prompts,
    Sam2, Sam2Config, Sam2ImageEncoder,
};
use segburn_train::loss::sam::{SamLoss, SamPrediction};

use super::pidnet_precision::Repeats;
use super::timing::{measure, Timing};

/// The official input side.
pub const HIERA_IMAGE_SIDE: usize = 1024;

/// The official model of `size` for square `side`-pixel inputs (1024 is the official one; a
/// smaller multiple of 32 shrinks the prompt encoder's frame with it, for quick checks).
fn config(size: HieraSize, side: usize) -> Sam2Config {
    let mut config = Sam2Config::sam2_1_hiera(size);
    config.prompt_encoder = PromptEncoderConfig::new([side / 16, side / 16], [side, side]);
    config
}

/// The model of [`config`] and its encoder.
fn model_and_encoder<B: Backend>(
    size: HieraSize,
    side: usize,
    device: &B::Device,
) -> Result<(Sam2<B>, Sam2ImageEncoder<B>), String> {
    let model = config(size, side).init::<B>(device);
    let encoder = model
        .image_encoder
        .clone()
        .ok_or("the SAM 2.1 configuration has an image encoder")?;
    Ok((model, encoder))
}

fn image<B: Backend>(side: usize, device: &B::Device) -> Tensor<B, 4> {
    Tensor::random([1, 3, side, side], Distribution::Normal(0.0, 1.0), device)
}

/// Encoder forward at batch 1, `side × side`.
pub fn hiera_encoder_forward<B: Backend>(
    size: HieraSize,
    side: usize,
    device: &B::Device,
    repeats: Repeats,
) -> Result<Timing, String> {
    let (_, encoder) = model_and_encoder::<B>(size, side, device)?;
    let image = image::<B>(side, device);
    let mut failure = None;
    let timing = measure(repeats.warmups, repeats.reps, || {
        match encoder.forward(image.clone()) {
            // Reading one value waits for the whole computation.
            Ok(levels) => drop(levels.stride16.slice([0..1, 0..1, 0..1, 0..1]).into_data()),
            Err(e) => failure = Some(e.to_string()),
        }
    });
    failure.map_or(Ok(timing), Err)
}

/// One fine-tuning step at batch 1 (see the module documentation); `frozen`: the encoder is
/// not trained.
pub fn hiera_finetune_step<B: AutodiffBackend>(
    size: HieraSize,
    side: usize,
    frozen: bool,
    device: &B::Device,
    repeats: Repeats,
) -> Result<Timing, String> {
    let (model, encoder) = model_and_encoder::<B>(size, side, device)?;
    // Frozen: the encoder runs on the inner backend (no autodiff graph), sharing the weights.
    let frozen_encoder = frozen.then(|| encoder.valid());
    let image = image::<B>(side, device);
    let side_f = side as f32;
    let points = PointPrompts {
        coords: Tensor::<B, 3>::from_floats(
            [[[0.3 * side_f, 0.4 * side_f], [0.7 * side_f, 0.6 * side_f]]],
            device,
        ),
        labels: Tensor::<B, 2, Int>::from_ints([[1, 0]], device),
    };
    let bbox = Tensor::<B, 2>::from_floats(
        [[0.1 * side_f, 0.2 * side_f, 0.8 * side_f, 0.9 * side_f]],
        device,
    );
    let targets = Tensor::<B, 4>::random([1, 1, side, side], Distribution::Default, device)
        .greater_elem(0.5)
        .float();
    let loss = SamLoss::default();
    let mut optimizer = AdamWConfig::new().init::<B, Sam2<B>>();
    let mut model = Some(model);
    let mut failure = None;
    let timing = measure(repeats.warmups, repeats.reps, || {
        let Some(current) = model.take() else { return };
        let step = || -> Result<Sam2<B>, String> {
            let features = match &frozen_encoder {
                Some(encoder) => {
                    let levels = encoder
                        .forward(image.clone().inner())
                        .map_err(|e| e.to_string())?;
                    current.features_from_backbone(BackboneFeatures {
                        stride4: Tensor::from_inner(levels.stride4),
                        stride8: Tensor::from_inner(levels.stride8),
                        stride16: Tensor::from_inner(levels.stride16),
                    })
                }
                None => current
                    .forward_image(image.clone())
                    .map_err(|e| e.to_string())?,
            };
            let prompts = Prompts {
                points: Some(points.clone()),
                boxes: Some(bbox.clone()),
                masks: None,
            };
            let output = current
                .forward_heads(&features, prompts, true)
                .map_err(|e| e.to_string())?;
            let prediction = SamPrediction {
                masks: upscale_mask_logits(output.masks, [side, side]),
                iou_pred: output.iou_pred,
                object_score_logits: output.object_score_logits,
            };
            let terms = loss
                .forward(&[prediction], targets.clone(), 1.0)
                .map_err(|e| e.to_string())?;
            let grads = terms.core_loss(&loss.config).backward();
            let grads = GradientsParams::from_grads(grads, &current);
            Ok(optimizer.step(1e-5, current, grads))
        };
        match step() {
            Ok(updated) => {
                // Wait for the optimizer's update (a no-op on the CPU).
                let _ = B::sync(device);
                model = Some(updated);
            }
            Err(e) => failure = Some(e),
        }
    });
    failure.map_or(Ok(timing), Err)
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};

    use super::*;

    #[test]
    fn encoder_forward_and_both_finetune_steps_run_once_at_64_pixels() {
        let device = Default::default();
        let once = Repeats {
            warmups: 0,
            reps: 1,
        };
        let forward = hiera_encoder_forward::<Flex>(HieraSize::Tiny, 64, &device, once);
        assert!(forward.expect("forward").median_ms > 0.0);
        for frozen in [true, false] {
            let step =
                hiera_finetune_step::<Autodiff<Flex>>(HieraSize::Tiny, 64, frozen, &device, once);
            assert!(step.expect("step").median_ms > 0.0, "frozen {frozen}");
        }
    }
}

//! SAM2 head workloads at the fixture sizes (16×16 image embedding, 256×256 input, 64×64
//! low-res masks), with the parity-tested loss of [`segburn_train::loss::sam`]
//! (`cargo run --release --bin bench -- --workloads sam2`):
//!
//! * decoder forward, batch 1, multimask, prompt embeddings precomputed (PyTorch ≈ 10 ms);
//! * training step, batch `n`: prompt encoder + decoder (multimask) + bilinear 64→256 +
//!   focal/dice/IoU/object losses + backward (PyTorch ≈ 130 ms at batch 4).

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor};
use segburn_models::sam2::{
    upscale_mask_logits, HighResFeatures, MaskDecoderConfig, MaskDecoderInput, PointPrompts,
    PromptEncoderConfig, Sam2, Sam2Config,
};
use segburn_train::loss::sam::{SamLoss, SamPrediction};

use super::pidnet_precision::Repeats;
use super::timing::{measure, Timing};

/// The image size the prompts live in, and the mask size the loss is computed at.
pub const SAM2_IMAGE: [usize; 2] = [256, 256];

fn model<B: Backend>(device: &B::Device) -> Sam2<B> {
    Sam2Config::new(
        PromptEncoderConfig::new([16, 16], SAM2_IMAGE),
        MaskDecoderConfig::new(),
    )
    .init(device)
}

/// Inputs of a batch shaped like the fixtures: two clicks and a box per row, image features,
/// 256×256 targets. Made once, outside the timed region.
struct Batch<B: Backend> {
    points: PointPrompts<B>,
    boxes: Tensor<B, 2>,
    image_embeddings: Tensor<B, 4>,
    high_res: HighResFeatures<B>,
    targets: Tensor<B, 4>,
}

fn batch<B: Backend>(n: usize, device: &B::Device) -> Batch<B> {
    let random =
        |shape: [usize; 4]| Tensor::<B, 4>::random(shape, Distribution::Normal(0.0, 1.0), device);
    Batch {
        points: PointPrompts {
            coords: Tensor::random([n, 2, 2], Distribution::Uniform(0.0, 255.0), device),
            labels: Tensor::<B, 1, Int>::from_ints([1, 0], device)
                .reshape([1, 2])
                .repeat_dim(0, n),
        },
        boxes: Tensor::<B, 2>::from_floats([[40.0, 50.0, 200.0, 220.0]], device).repeat_dim(0, n),
        image_embeddings: random([n, 256, 16, 16]),
        high_res: HighResFeatures {
            feat_s0: random([n, 32, 64, 64]),
            feat_s1: random([n, 64, 32, 32]),
        },
        targets: random([n, 1, 256, 256]).greater_elem(0.5).float(),
    }
}

fn decoder_input<B: Backend>(model: &Sam2<B>, batch: &Batch<B>) -> MaskDecoderInput<B> {
    let prompts = model
        .sam_prompt_encoder
        .forward(Some(&batch.points), Some(batch.boxes.clone()), None)
        .expect("bench prompts are well-formed");
    MaskDecoderInput {
        image_embeddings: batch.image_embeddings.clone(),
        image_pe: model.sam_prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings: prompts.sparse,
        dense_prompt_embeddings: prompts.dense,
        high_res_features: Some(batch.high_res.clone()),
    }
}

/// Decoder forward, batch 1, multimask output, prompt embeddings made outside the timing.
pub fn sam2_decoder_forward<B: Backend>(device: &B::Device, repeats: Repeats) -> Timing {
    let model = model::<B>(device);
    let input = decoder_input(&model, &batch(1, device));
    measure(repeats.warmups, repeats.reps, || {
        let output = model
            .sam_mask_decoder
            .forward(input.clone(), true)
            .expect("bench input is well-formed");
        let _ = output.masks.slice([0..1, 0..1, 0..1, 0..1]).into_data();
    })
}

/// One training step at batch `n`: prompts → decoder → upsample to 256² → SAM2 loss → backward.
pub fn sam2_train_step<B: AutodiffBackend>(
    n: usize,
    device: &B::Device,
    repeats: Repeats,
) -> Timing {
    let model = model::<B>(device);
    let batch = batch::<B>(n, device);
    let loss = SamLoss::default();
    measure(repeats.warmups, repeats.reps, || {
        let output = model
            .sam_mask_decoder
            .forward(decoder_input(&model, &batch), true)
            .expect("bench input is well-formed");
        let prediction = SamPrediction {
            masks: upscale_mask_logits(output.masks, SAM2_IMAGE),
            iou_pred: output.iou_pred,
            object_score_logits: output.object_score_logits,
        };
        let terms = loss
            .forward(&[prediction], batch.targets.clone(), n as f32)
            .expect("shapes match by construction");
        let grads = terms.core_loss(&loss.config).backward();
        std::hint::black_box(grads);
        let _ = B::sync(device);
    })
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};

    use super::*;

    #[test]
    fn decoder_forward_and_train_step_run_once() {
        let device = Default::default();
        let once = Repeats {
            warmups: 0,
            reps: 1,
        };
        assert!(sam2_decoder_forward::<Flex>(&device, once).median_ms > 0.0);
        assert!(sam2_train_step::<Autodiff<Flex>>(1, &device, once).median_ms > 0.0);
    }
}

//! CPU timings of the SAM2 heads at the fixture sizes (16×16 embedding, 256×256 input,
//! 64×64 low-res masks), to compare with the PyTorch anchors of `reference/sam2-spec.md`:
//!
//! * A: decoder forward, batch 1, multimask, prompt embeddings precomputed (≈ 10 ms in torch);
//! * B: training step, batch 4: prompt encoder + decoder (multimask) + bilinear 64→256 +
//!   focal/dice/IoU/object losses + backward (≈ 130 ms); B2: the same with the loss on the
//!   64×64 logits (≈ 75 ms).
//!
//! Each figure is the median of 5 runs after 2 warm-ups.
//!
//! ```text
//! cargo run --release -p segburn-models --example sam2_bench
//! ```
//!
//! The loss below mirrors `segburn_train::loss::sam` (the parity-tested implementation, which
//! this crate cannot depend on) op for op, so that the timing covers the same work.

use std::time::{Duration, Instant};

use burn::backend::{flex::FlexDevice, Autodiff, Flex};
use burn::tensor::activation::sigmoid;
use burn::tensor::{backend::Backend, Distribution, Int, Tensor};
use segburn_models::sam2::{
    upscale_mask_logits, HighResFeatures, MaskDecoderConfig, MaskDecoderInput, PointPrompts,
    PromptEncoderConfig, Sam2, Sam2Config,
};

const WARMUP: usize = 2;
const RUNS: usize = 5;

fn median_ms(mut run: impl FnMut()) -> f64 {
    for _ in 0..WARMUP {
        run();
    }
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2].as_secs_f64() * 1e3
}

fn model<B: Backend>(device: &B::Device) -> Sam2<B> {
    Sam2Config::new(
        PromptEncoderConfig::new([16, 16], [256, 256]),
        MaskDecoderConfig::new(),
    )
    .init(device)
}

/// Raw inputs of a batch shaped like the fixtures: two clicks and a box per row, image
/// features, and 256×256 / 64×64 targets. Made once, outside the timed region.
#[derive(Clone)]
struct Batch<B: Backend> {
    points: PointPrompts<B>,
    boxes: Tensor<B, 2>,
    image_embeddings: Tensor<B, 4>,
    high_res: HighResFeatures<B>,
    targets: Tensor<B, 4>,
    targets_low_res: Tensor<B, 4>,
}

fn batch<B: Backend>(n: usize, device: &B::Device) -> Batch<B> {
    let random =
        |shape: [usize; 4]| Tensor::<B, 4>::random(shape, Distribution::Normal(0.0, 1.0), device);
    let targets = random([n, 1, 256, 256]).greater_elem(0.5).float();
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
        targets_low_res: upscale_mask_logits(targets.clone(), [64, 64])
            .greater_elem(0.5)
            .float(),
        targets,
    }
}

/// The prompt encoder's part: the decoder input of a batch.
fn decoder_input<B: Backend>(model: &Sam2<B>, batch: &Batch<B>) -> MaskDecoderInput<B> {
    let prompts = model
        .sam_prompt_encoder
        .forward(Some(&batch.points), Some(batch.boxes.clone()), None)
        .expect("prompts");
    MaskDecoderInput {
        image_embeddings: batch.image_embeddings.clone(),
        image_pe: model.sam_prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings: prompts.sparse,
        dense_prompt_embeddings: prompts.dense,
        high_res_features: Some(batch.high_res.clone()),
    }
}

/// SAM2's loss (see `segburn_train::loss::sam`): `[N, M, HW]` logits, `[N, 1, HW]` targets.
fn sam_loss<B: Backend>(
    masks: Tensor<B, 4>,
    ious: Tensor<B, 2>,
    objects: Tensor<B, 2>,
    targets: Tensor<B, 4>,
) -> Tensor<B, 1> {
    let [n, m, h, w] = masks.dims();
    let x = masks.reshape([n, m, h * w]);
    let t = targets.reshape([n, 1, h * w]).repeat_dim(1, m);
    let p = sigmoid(x.clone());
    let ce = x.clone().clamp_min(0.0) - x.clone() * t.clone() + x.clone().abs().neg().exp().log1p();
    let p_t = p.clone() * t.clone() + (p.clone().neg() + 1.0) * (t.clone().neg() + 1.0);
    let alpha_t = t.clone() * 0.25 + (t.clone().neg() + 1.0) * 0.75;
    let focal = (ce * (p_t.neg() + 1.0).powf_scalar(2.0) * alpha_t)
        .mean_dim(2)
        .reshape([n, m]);
    let dice = (((p.clone() * t.clone()).sum_dim(2) * 2.0 + 1.0)
        / (p.sum_dim(2) + t.clone().sum_dim(2) + 1.0))
        .neg()
        .reshape([n, m])
        + 1.0;
    let predicted = x.clone().greater_elem(0.0);
    let truth = t.greater_elem(0.0);
    let intersection = predicted.clone().bool_and(truth.clone()).float().sum_dim(2);
    let union = predicted.bool_or(truth.clone()).float().sum_dim(2);
    let iou = (ious - (intersection / union.clamp_min(1.0)).reshape([n, m])).abs();
    let present = truth.narrow(1, 0, 1).any_dim(2).reshape([n, 1]).float();
    let class = objects.clone().clamp_min(0.0) - objects.clone() * present.clone()
        + objects.abs().neg().exp().log1p();
    let best = (focal.clone() * 20.0 + dice.clone()).argmin(1);
    let per_object = focal.gather(1, best.clone()) * 20.0 + dice.gather(1, best) + iou.mean_dim(1);
    ((per_object * present).sum() + class.sum()) / n as f32
}

fn train_step(
    model: &Sam2<Autodiff<Flex>>,
    batch: &Batch<Autodiff<Flex>>,
    loss_at_image_size: bool,
) {
    let output = model
        .sam_mask_decoder
        .forward(decoder_input(model, batch), true)
        .expect("decoder");
    let (masks, targets) = if loss_at_image_size {
        (
            upscale_mask_logits(output.masks, [256, 256]),
            batch.targets.clone(),
        )
    } else {
        (output.masks, batch.targets_low_res.clone())
    };
    let loss = sam_loss(masks, output.iou_pred, output.object_score_logits, targets);
    let grads = loss.backward();
    std::hint::black_box(grads);
}

fn main() {
    let device = FlexDevice;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());

    let inference = model::<Flex>(&device);
    let input = decoder_input(&inference, &batch(1, &device));
    let decoder_ms = median_ms(|| {
        let output = inference
            .sam_mask_decoder
            .forward(input.clone(), true)
            .expect("decoder");
        std::hint::black_box(output.masks.into_data());
    });

    let training = model::<Autodiff<Flex>>(&device);
    let batch4 = batch(4, &device);
    let step_ms = median_ms(|| train_step(&training, &batch4, true));
    let step_low_res_ms = median_ms(|| train_step(&training, &batch4, false));

    println!("SAM2 heads on Flex (CPU, f32, {threads} hardware threads), median of {RUNS} after {WARMUP} warm-ups");
    println!("  A  decoder forward, B=1, multimask:            {decoder_ms:8.2} ms   (PyTorch ≈ 10 ms: ratio {:.2})", decoder_ms / 10.0);
    println!("  B  train step, B=4, loss at 256²:              {step_ms:8.2} ms   (PyTorch ≈ 130 ms: ratio {:.2})", step_ms / 130.0);
    println!("  B2 train step, B=4, loss at 64²:               {step_low_res_ms:8.2} ms   (PyTorch ≈ 75 ms: ratio {:.2})", step_low_res_ms / 75.0);
}

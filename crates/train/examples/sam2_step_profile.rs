//! Time spent in the phases of a SAM2 head training step on the CPU (`Autodiff<Flex>`), at the
//! `bench --workloads sam2` sizes: batch 4, 16×16 image embedding, two clicks and a box per
//! object, masks upscaled 64 → 256, the SAM2 loss (focal ×20, dice, IoU, object score).
//! `cargo run --release -p segburn-train --example sam2_step_profile -- [reps]`

use std::time::Instant;

use burn::backend::{Autodiff, Flex};
use burn::tensor::{Distribution, Int, Tensor};
use segburn_models::sam2::{
    upscale_mask_logits, HighResFeatures, MaskDecoderConfig, MaskDecoderInput, PointPrompts,
    PromptEncoderConfig, Sam2Config,
};
use segburn_train::loss::sam::{SamLoss, SamPrediction};

type Ad = Autodiff<Flex>;

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let n = 4;
    let device = Default::default();
    let model = Sam2Config::new(
        PromptEncoderConfig::new([16, 16], [256, 256]),
        MaskDecoderConfig::new(),
    )
    .init::<Ad>(&device);
    let random =
        |shape: [usize; 4]| Tensor::<Ad, 4>::random(shape, Distribution::Normal(0.0, 1.0), &device);
    let points = PointPrompts {
        coords: Tensor::random([n, 2, 2], Distribution::Uniform(0.0, 255.0), &device),
        labels: Tensor::<Ad, 1, Int>::from_ints([1, 0], &device)
            .reshape([1, 2])
            .repeat_dim(0, n),
    };
    let boxes =
        Tensor::<Ad, 2>::from_floats([[40.0, 50.0, 200.0, 220.0]], &device).repeat_dim(0, n);
    let image_embeddings = random([n, 256, 16, 16]);
    let high_res = HighResFeatures {
        feat_s0: random([n, 32, 64, 64]),
        feat_s1: random([n, 64, 32, 32]),
    };
    let targets = random([n, 1, 256, 256]).greater_elem(0.5).float();
    let loss = SamLoss::default();
    let mut phases = vec![[0.0f64; 4]; reps + 1];
    for times in phases.iter_mut() {
        let start = Instant::now();
        let prompts = model
            .sam_prompt_encoder
            .forward(Some(&points), Some(boxes.clone()), None)
            .expect("well-formed prompts");
        let output = model
            .sam_mask_decoder
            .forward(
                MaskDecoderInput {
                    image_embeddings: image_embeddings.clone(),
                    image_pe: model.sam_prompt_encoder.get_dense_pe(),
                    sparse_prompt_embeddings: prompts.sparse,
                    dense_prompt_embeddings: prompts.dense,
                    high_res_features: Some(high_res.clone()),
                },
                true,
            )
            .expect("well-formed input");
        let decoded = start.elapsed().as_secs_f64();
        let prediction = SamPrediction {
            masks: upscale_mask_logits(output.masks, [256, 256]),
            iou_pred: output.iou_pred,
            object_score_logits: output.object_score_logits,
        };
        let upscaled = start.elapsed().as_secs_f64();
        let terms = loss
            .forward(&[prediction], targets.clone(), n as f32)
            .expect("shapes match");
        let core = terms.core_loss(&loss.config);
        let lossed = start.elapsed().as_secs_f64();
        let grads = core.backward();
        std::hint::black_box(grads);
        let total = start.elapsed().as_secs_f64();
        *times = [
            decoded,
            upscaled - decoded,
            lossed - upscaled,
            total - lossed,
        ]
        .map(|t| t * 1e3);
    }
    let median = |i: usize| {
        let mut v: Vec<f64> = phases[1..].iter().map(|t| t[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("SAM2 train step, batch {n}, medians of {reps} (ms):");
    for (i, name) in [
        "prompts + decoder forward",
        "upscale 64->256",
        "loss forward",
        "backward",
    ]
    .iter()
    .enumerate()
    {
        println!("  {name:<26} {:8.2}", median(i));
    }
}

//! What fine-tuning needs of the SAM 2.1 image path beyond parity: half precision (the
//! encoder computes in the input's dtype, layer by layer, its norms in f32) and seeded
//! stochastic depth in the Hiera trunk.

mod sam2_hiera_support;

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::{DType, Tensor};
use sam2_hiera_support::{fixture, input, load_model};
use segburn_models::fixtures::{max_abs, max_abs_diff, tensor_values};
use segburn_models::sam2::{DropPath, ImageFeatures, Sam2};

type B = Flex;

/// Every level of the features, flattened in f64.
fn levels(features: ImageFeatures<B>) -> Vec<Vec<f64>> {
    let high = features.high_res.expect("high-res features");
    vec![
        tensor_values(features.image_embed),
        tensor_values(high.feat_s0),
        tensor_values(high.feat_s1),
    ]
}

/// The fixture model in f32 and its preprocessed 256² image.
fn model_and_image() -> (Sam2<B>, Tensor<B, 4>) {
    let device = FlexDevice;
    let model = load_model::<B>(&device, DType::F32);
    let image = input(
        &fixture("encoder.safetensors"),
        "image",
        &device,
        DType::F32,
    );
    (model, image)
}

#[test]
fn the_image_path_runs_in_bf16_and_f16_close_to_f32() {
    let (model, image) = model_and_image();
    let reference = levels(model.forward_image(image.clone()).expect("f32"));
    // Relative to the largest value of each level; bf16 keeps 8 bits of mantissa, f16 11.
    for (dtype, tolerance) in [(DType::BF16, 3e-2), (DType::F16, 5e-3)] {
        let features = model
            .forward_image(image.clone().cast(dtype))
            .expect("half");
        assert_eq!(features.image_embed.dtype(), dtype, "computed in {dtype:?}");
        for (i, (ours, exact)) in levels(features).iter().zip(&reference).enumerate() {
            assert!(ours.iter().all(|v| v.is_finite()), "{dtype:?} level {i}");
            let error = max_abs_diff(ours, exact) / max_abs(exact);
            println!("{dtype:?} level {i}: max error / max |f32| = {error:.2e}");
            assert!(error <= tolerance, "{dtype:?} level {i}: {error:.3e}");
        }
    }
}

#[test]
fn drop_path_is_seeded_and_the_identity_at_rate_zero() {
    let (model, image) = model_and_image();
    // A batch of 4 copies: samples draw separately.
    let images = Tensor::cat(vec![image; 4], 0);
    let run = |drop: Option<DropPath>| {
        let features = model
            .forward_image_with(images.clone(), drop.as_ref())
            .expect("forward");
        tensor_values(features.image_embed)
    };
    let plain = run(None);
    let off = DropPath {
        rate: 0.0,
        seed: 1,
        step: 0,
        micro_batch: 0,
    };
    assert_eq!(run(Some(off)), plain, "rate 0 drops nothing");
    let on = DropPath { rate: 0.9, ..off };
    let dropped = run(Some(on));
    assert_eq!(run(Some(on)), dropped, "same seed and step, same draws");
    assert_ne!(dropped, plain);
    assert_ne!(
        run(Some(DropPath { step: 1, ..on })),
        dropped,
        "a new step draws anew"
    );
    // The copies of one image now differ: each sample draws its own mask.
    let per_sample = dropped.len() / 4;
    let samples: Vec<&[f64]> = dropped.chunks(per_sample).collect();
    assert!(samples.iter().any(|s| *s != samples[0]));
    // And without drop path the model is the evaluation model.
    assert_eq!(
        tensor_values(
            model
                .forward_image(images.clone())
                .expect("eval")
                .image_embed
        ),
        plain
    );
}

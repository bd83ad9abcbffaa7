//! Inference modes on a tiny PIDNet-S: shapes, and the cases where modes must agree.

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use segburn_models::pidnet::{PidNet, PidNetConfig, PidNetSize};

use super::*;

fn model() -> PidNet<Flex> {
    PidNetConfig::new(PidNetSize::S, 5)
        .with_augment(false)
        .init::<Flex>(&Default::default())
}

fn image(h: usize, w: usize) -> Tensor<Flex, 4> {
    Tensor::<Flex, 4>::random(
        [1, 3, h, w],
        Distribution::Normal(0.0, 1.0),
        &Default::default(),
    )
}

fn max_abs_diff(a: Tensor<Flex, 4>, b: Tensor<Flex, 4>) -> f32 {
    assert_eq!(a.dims(), b.dims());
    (a - b).abs().max().into_scalar()
}

fn slide(crop: [usize; 2], stride: [usize; 2]) -> InferenceConfig {
    InferenceConfig {
        mode: InferenceMode::Slide { crop, stride },
        ..InferenceConfig::default()
    }
}

#[test]
fn every_mode_gives_full_resolution_logits_for_any_size() {
    let model = model();
    for (h, w) in [(64, 96), (60, 90), (33, 47)] {
        let x = image(h, w);
        let configs = [
            InferenceConfig::default(),
            slide([32, 48], [24, 32]),
            InferenceConfig {
                flip: true,
                scales: vec![0.5, 1.25],
                ..slide([40, 40], [20, 20])
            },
        ];
        for config in &configs {
            let logits = predict_logits(&model, x.clone(), config).unwrap();
            assert_eq!(logits.dims(), [1, 5, h, w], "{}", config.describe());
            let classes = predict_classes(&model, x.clone(), config).unwrap();
            assert_eq!(classes.dims(), [1, h, w]);
        }
    }
}

#[test]
fn one_window_covering_the_image_is_the_whole_image_pass() {
    let model = model();
    for (h, w) in [(64, 96), (60, 90)] {
        let x = image(h, w);
        let whole = predict_logits(&model, x.clone(), &InferenceConfig::default()).unwrap();
        for config in [slide([h, w], [h, w]), slide([512, 512], [256, 256])] {
            let slid = predict_logits(&model, x.clone(), &config).unwrap();
            assert!(max_abs_diff(whole.clone(), slid) <= 1e-6);
        }
    }
}

#[test]
fn overlapping_windows_are_averaged_not_summed() {
    // 64×64 windows at stride 32 over a 64×128 image start at x = 0, 32 and 64: columns 32..96
    // are seen by two windows, the others by one. Each window alone is a whole-image pass of
    // its crop, so the slide result must be their sum divided by that count.
    let model = model();
    let x = image(64, 128);
    let slid = predict_logits(&model, x.clone(), &slide([64, 64], [32, 32])).unwrap();
    let [_, classes, _, _] = slid.dims();
    let device = Default::default();
    let mut sum = Tensor::<Flex, 4>::zeros([1, classes, 64, 128], &device);
    for x0 in [0, 32, 64] {
        let crop = x.clone().slice([0..1, 0..3, 0..64, x0..x0 + 64]);
        let window = predict_logits(&model, crop, &InferenceConfig::default()).unwrap();
        let ranges = [0..1, 0..classes, 0..64, x0..x0 + 64];
        let placed = sum.clone().slice(ranges.clone()) + window;
        sum = sum.slice_assign(ranges, placed);
    }
    let counts: Vec<f32> = (0..128)
        .map(|col| if (32..96).contains(&col) { 2.0 } else { 1.0 })
        .collect();
    let counts = Tensor::<Flex, 1>::from_floats(counts.as_slice(), &device).reshape([1, 1, 1, 128]);
    let expected = sum / counts;
    let scale: f32 = expected.clone().abs().max().into_scalar();
    let diff = max_abs_diff(expected, slid);
    assert!(
        diff <= 1e-5 * scale.max(1.0),
        "diff {diff} at logit scale {scale}"
    );
}

#[test]
fn single_scale_one_is_the_whole_image_pass() {
    let model = model();
    let x = image(64, 64);
    let whole = predict_logits(&model, x.clone(), &InferenceConfig::default()).unwrap();
    let config = InferenceConfig {
        scales: vec![1.0],
        ..InferenceConfig::default()
    };
    let again = predict_logits(&model, x, &config).unwrap();
    assert_eq!(max_abs_diff(whole, again), 0.0);
}

#[test]
fn flip_averaging_is_mirror_symmetric() {
    // f(x) = (g(x) + mirror(g(mirror x))) / 2, so f(mirror x) = mirror(f(x)) exactly.
    let model = model();
    let x = image(64, 96);
    for base in [InferenceConfig::default(), slide([48, 48], [32, 32])] {
        let config = InferenceConfig { flip: true, ..base };
        let direct = predict_logits(&model, x.clone(), &config).unwrap();
        let mirrored = predict_logits(&model, x.clone().flip([3]), &config).unwrap();
        assert!(max_abs_diff(direct.clone(), mirrored.flip([3])) <= 1e-6);
        let plain = predict_logits(&model, x.clone(), &InferenceConfig::default()).unwrap();
        assert!(max_abs_diff(direct, plain) > 0.0, "flip changes the logits");
    }
}

#[test]
fn impossible_settings_are_named() {
    let model = model();
    let x = image(16, 16);
    let error = predict_logits(&model, x.clone(), &slide([32, 32], [64, 16])).unwrap_err();
    assert!(error.to_string().contains("stride"), "{error}");
    let config = InferenceConfig {
        scales: vec![],
        ..InferenceConfig::default()
    };
    assert!(predict_logits(&model, x.clone(), &config)
        .unwrap_err()
        .to_string()
        .contains("scale"));
    let config = InferenceConfig {
        scales: vec![-1.0],
        ..InferenceConfig::default()
    };
    assert!(predict_logits(&model, x, &config).is_err());
}

#[test]
fn bf16_runs_the_network_in_half_precision_and_returns_f32_logits() {
    let model = model();
    let x = image(64, 96);
    let config = InferenceConfig {
        precision: crate::mixed_precision::Precision::Bf16,
        ..slide([48, 64], [32, 32])
    };
    let half = predict_logits(&model, x.clone(), &config).unwrap();
    assert_eq!(half.dtype(), burn::tensor::DType::F32);
    let full = predict_logits(&model, x, &slide([48, 64], [32, 32])).unwrap();
    // bf16 keeps 8 bits of mantissa: close to f32, not equal. This random, untrained network
    // has logits of ~50-200, and its error varies with the weights: over 12 seeds the relative
    // L2 error was 0.9-6.7 % and the argmax agreed on 96.7-100 % of pixels (the largest single
    // difference reached 31 % of the largest logit, so that is not what is checked).
    let rel_l2: f32 = {
        let error: f32 = (half.clone() - full.clone())
            .powf_scalar(2.0)
            .sum()
            .sqrt()
            .into_scalar();
        let norm: f32 = full.clone().powf_scalar(2.0).sum().sqrt().into_scalar();
        error / norm
    };
    let agree: f32 = half
        .clone()
        .argmax(1)
        .equal(full.clone().argmax(1))
        .float()
        .mean()
        .into_scalar();
    let diff = max_abs_diff(half, full);
    assert!(
        diff > 0.0,
        "bf16 gave exactly the f32 logits: it did not run in bf16"
    );
    assert!(rel_l2 < 0.15, "relative L2 error {rel_l2}");
    assert!(agree > 0.9, "argmax agrees on only {agree} of the pixels");
}

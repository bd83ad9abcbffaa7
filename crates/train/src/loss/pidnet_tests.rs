//! Parity of the PIDNet composite with the official `FullModel`, its gradient, and the
//! degenerate batches.

use super::*;
use crate::compute_threads::on_compute_pool;
use crate::loss::test_support::*;
use crate::loss::{
    ClassWeights, CrossEntropyLoss, OhemConfig, OhemCrossEntropy, CITYSCAPES_CLASS_WEIGHTS,
};
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{DType, TensorData};
use segburn_models::fixtures::{max_abs, max_abs_diff, tensor_values, Fixture};

fn official() -> PidNetLoss {
    PidNetLoss::new(PidNetLossConfig {
        class_weights: ClassWeights::Explicit(CITYSCAPES_CLASS_WEIGHTS.to_vec()),
        ..Default::default()
    })
    .unwrap()
}

fn train_outputs() -> Fixture {
    Fixture::load("pidnet_s/train/outputs.safetensors").expect("train outputs fixture")
}

#[test]
fn fixture_class_weights_are_the_cityscapes_ones() {
    let got = class_weights(losses_fixture());
    assert_eq!(got, CITYSCAPES_CLASS_WEIGHTS.to_vec());
}

#[test]
fn sem_loss_list_path_matches_pytorch() {
    // OhemCrossEntropy([logits.flip(-1), logits], target).mean():
    // 0.4 · mean over all pixels of the per-pixel CE + 1.0 · OHEM.
    let fx = losses_fixture();
    let logits = fx_float::<4>(fx, "logits");
    let ce = CrossEntropyLoss::new(255).with_class_weights(class_weights(fx));
    let aux = ce
        .forward_mean_over_all_pixels(logits.clone().flip([3]), fx_int(fx, "target"))
        .unwrap();
    let ohem = OhemCrossEntropy::new(255, OhemConfig::default())
        .with_class_weights(class_weights(fx))
        .forward(logits, fx_int(fx, "target"))
        .unwrap();
    assert_scalar(aux.mul_scalar(0.4) + ohem, fx, "sem_loss_list_mean", 1e-5);
}

type FullLossInputs = (
    Tensor<B, 4>,
    Tensor<B, 4>,
    Tensor<B, 4>,
    Tensor<B, 3, Int>,
    Tensor<B, 3>,
);

/// The 1/8 heads of the train-mode outputs upsampled to the labels' 128×256 (bilinear,
/// align_corners true, as the official loss does), the 1/8 boundary head (the loss upsamples
/// it), labels and boundary target.
fn fullloss_inputs() -> FullLossInputs {
    let fx = fullloss_fixture();
    let outputs = train_outputs();
    let up = |key: &str| interpolate(fx_float::<4>(&outputs, key), [128, 256], upsampling());
    (
        up("p_aux"),
        up("main"),
        fx_float::<4>(&outputs, "boundary"),
        fx_int(fx, "labels"),
        fx_float::<3>(fx, "bd_gt"),
    )
}

fn upsampling() -> InterpolateOptions {
    InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(true)
}

#[test]
fn saved_heads_are_the_train_outputs_upsampled() {
    // Establishes that `train/outputs.safetensors` holds the heads the full loss was computed
    // from: our upsampling of them against PyTorch's (a strided sample `up.<head>` at
    // `sample_index.upsampled`, plus the whole tensor's sum and sum of squares).
    let fx = fullloss_fixture();
    let index: Vec<usize> = fx
        .data("sample_index.upsampled")
        .unwrap()
        .iter::<i64>()
        .map(|i| i as usize)
        .collect();
    let (p_aux, main, ..) = fullloss_inputs();
    for (head, ours) in [("p_aux", p_aux), ("main", main)] {
        let ours = tensor_values(ours);
        let sample: Vec<f64> = index.iter().map(|&i| ours[i]).collect();
        let diff = max_abs_diff(&sample, &fx.values_f64(&format!("up.{head}")).unwrap());
        println!(
            "parity up.{head}: max abs diff {diff:.2e} over {} samples",
            index.len()
        );
        assert!(diff < 1e-4, "{head}: {diff}");
        // Every value within 1e-4 bounds the sum by n·1e-4 and the norm by √n·1e-4.
        let n = ours.len() as f64;
        let sum = fx.values_f64(&format!("sum.up.{head}")).unwrap()[0];
        let norm = fx.values_f64(&format!("sumsq.up.{head}")).unwrap()[0].sqrt();
        let our_norm = ours.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!(
            (ours.iter().sum::<f64>() - sum).abs() < 1e-4 * n,
            "{head} sum"
        );
        assert!((our_norm - norm).abs() < 1e-4 * n.sqrt(), "{head} norm");
    }
}

#[test]
fn full_loss_terms_match_pytorch() {
    let fx = fullloss_fixture();
    let (p_aux, main, boundary, labels, bd_gt) = fullloss_inputs();
    let out = official()
        .forward(p_aux, main, boundary, labels, bd_gt)
        .unwrap();
    assert_scalar(out.semantic(), fx, "loss_s_mean", 1e-5);
    assert_scalar(out.boundary.clone(), fx, "loss_b", 1e-5);
    assert_scalar(out.bas.clone(), fx, "loss_sb", 1e-5);
    assert_scalar(out.total.clone(), fx, "total_loss", 1e-5);
    let values = out.values();
    let sum = values.aux + values.main + values.boundary + values.bas;
    assert!((values.total - sum).abs() < 1e-5 * sum, "{values:?}");
}

#[test]
fn full_loss_from_one_eighth_outputs_upsamples_like_the_official_loss() {
    let fx = fullloss_fixture();
    let outputs = train_outputs();
    let out = official()
        .forward(
            fx_float::<4>(&outputs, "p_aux"),
            fx_float::<4>(&outputs, "main"),
            fx_float::<4>(&outputs, "boundary"),
            fx_int(fx, "labels"),
            fx_float::<3>(fx, "bd_gt"),
        )
        .unwrap();
    assert_scalar(out.total, fx, "total_loss", 1e-5);
}

#[test]
fn valid_mean_aux_option_divides_by_the_valid_weights() {
    let (p_aux, main, boundary, labels, bd_gt) = fullloss_inputs();
    let config = PidNetLossConfig {
        class_weights: ClassWeights::Explicit(CITYSCAPES_CLASS_WEIGHTS.to_vec()),
        aux_reduction: AuxReduction::ValidWeightedMean,
        ..Default::default()
    };
    let valid = PidNetLoss::new(config).unwrap();
    let a = official()
        .forward(
            p_aux.clone(),
            main.clone(),
            boundary.clone(),
            labels.clone(),
            bd_gt.clone(),
        )
        .unwrap();
    let b = valid
        .forward(p_aux, main, boundary, labels.clone(), bd_gt)
        .unwrap();
    // aux_all = Σ w·CE / (N·H·W) and aux_valid = Σ w·CE / Σ w.
    let label_values: Vec<i64> = labels.into_data().iter::<i64>().collect();
    let weight_sum: f64 = label_values
        .iter()
        .filter(|&&y| y != 255)
        .map(|&y| f64::from(CITYSCAPES_CLASS_WEIGHTS[y as usize]))
        .sum();
    let ratio = scalar(b.aux) / scalar(a.aux);
    assert_close(
        ratio,
        label_values.len() as f64 / weight_sum,
        1e-5,
        "aux valid/all ratio",
    );
    assert_eq!(scalar(a.main), scalar(b.main));
}

/// f64 copy of a fixture tensor on the autodiff backend.
fn f64_leaf<const D: usize>(t: Tensor<B, D>) -> Tensor<AD, D> {
    let data = t.into_data().convert::<f64>();
    Tensor::from_data(data, (&device(), DType::F64)).require_grad()
}

#[test]
fn full_loss_gradient_matches_finite_differences() {
    // In f64 (the losses keep f64 inputs in f64) so that central differences resolve the
    // ~1e-5 per-logit gradients of a mean over 65k pixels.
    let (p_aux, main, boundary, labels, bd_gt) = fullloss_inputs();
    let boundary = interpolate(boundary, [128, 256], upsampling());
    let loss = official();
    let targets = PixelTargets::from_tensor(labels, 19, 255).unwrap();
    let inputs = [p_aux, main, boundary];
    let leaves: Vec<Tensor<AD, 4>> = inputs.iter().map(|t| f64_leaf(t.clone())).collect();
    let bd_gt_ad: Tensor<AD, 3> = Tensor::from_data(bd_gt.clone().into_data(), &device());
    let out = loss
        .forward_targets(
            leaves[0].clone(),
            leaves[1].clone(),
            leaves[2].clone(),
            &targets,
            bd_gt_ad,
        )
        .unwrap();
    let grads = on_compute_pool(|| out.total.backward());

    let host: Vec<Vec<f64>> = inputs.iter().map(|t| tensor_values(t.clone())).collect();
    let eval = |which: usize, index: usize, delta: f64| -> f64 {
        let tensors: Vec<Tensor<B, 4>> = (0..3)
            .map(|k| {
                let mut values = host[k].clone();
                if k == which {
                    values[index] += delta;
                }
                let data = TensorData::new(values, inputs[k].dims());
                Tensor::from_data(data, (&device(), DType::F64))
            })
            .collect();
        let [a, m, b]: [Tensor<B, 4>; 3] = tensors.try_into().unwrap();
        scalar(
            loss.forward_targets(a, m, b, &targets, bd_gt.clone())
                .unwrap()
                .total,
        )
    };

    let eps = 1e-4;
    let labels = targets.labels();
    let pixels = 2 * 128 * 256;
    for (which, name) in [(0, "p_aux"), (1, "main"), (2, "boundary")] {
        let grad: Vec<f64> = leaves[which]
            .grad(&grads)
            .unwrap()
            .into_data()
            .iter::<f64>()
            .collect();
        let channels = grad.len() / pixels;
        let mut ignored_checked = false;
        let mut errors = Vec::new();
        for probe in 0..12usize {
            let index = (probe * 1_000_003 + 17) % grad.len();
            let pixel = (index / (channels * 32768)) * 32768 + index % 32768;
            ignored_checked |= labels[pixel] == 255;
            let fd = (eval(which, index, eps) - eval(which, index, -eps)) / (2.0 * eps);
            let scale = max_abs(&grad);
            let err = (fd - grad[index]).abs() / scale;
            errors.push(err);
            assert!(
                err < 1e-5,
                "{name}[{index}]: autodiff {} vs fd {fd}",
                grad[index]
            );
        }
        let worst = max_abs(&errors);
        println!("gradient {name}: worst |fd − autodiff| / max|grad| = {worst:.2e} over 12 probes (ignored pixel probed: {ignored_checked})");
    }
}

#[test]
fn all_ignored_batch_is_finite_with_zero_semantic_gradient() {
    let device = device();
    let leaf = |shape: [usize; 4]| {
        Tensor::<AD, 4>::random(shape, burn::tensor::Distribution::Normal(0.0, 2.0), &device)
            .require_grad()
    };
    let (p_aux, main, boundary) = (leaf([2, 19, 4, 4]), leaf([2, 19, 4, 4]), leaf([2, 1, 4, 4]));
    let labels = Tensor::<AD, 3, Int>::full([2, 32, 32], 255, &device);
    let bd_gt = Tensor::<AD, 3>::zeros([2, 32, 32], &device);
    let out = official()
        .forward(p_aux.clone(), main.clone(), boundary.clone(), labels, bd_gt)
        .unwrap();
    let values = out.values();
    assert_eq!((values.aux, values.main, values.bas), (0.0, 0.0, 0.0));
    assert!(values.total.is_finite());
    let grads = on_compute_pool(|| out.total.backward());
    for t in [p_aux, main] {
        let g = t.grad(&grads).expect("connected to the graph");
        assert!(g.into_data().iter::<f32>().all(|v| v == 0.0));
    }
}

#[test]
fn wrong_length_class_weights_is_a_clear_error() {
    let (p_aux, main, boundary, labels, bd_gt) = fullloss_inputs();
    let loss = PidNetLoss::new(PidNetLossConfig {
        class_weights: ClassWeights::Explicit(vec![1.0; 11]),
        ..Default::default()
    })
    .unwrap();
    let err = loss
        .forward(p_aux, main, boundary, labels, bd_gt)
        .unwrap_err();
    assert_eq!(
        err,
        LossError::ClassWeightsLength {
            expected: 19,
            got: 11
        }
    );
}

#[test]
fn mismatched_sizes_without_upsampling_are_an_error() {
    let outputs = train_outputs();
    let fx = fullloss_fixture();
    let loss = PidNetLoss::new(PidNetLossConfig {
        upsample_to_labels: false,
        ..Default::default()
    })
    .unwrap();
    let err = loss
        .forward(
            fx_float::<4>(&outputs, "p_aux"),
            fx_float::<4>(&outputs, "main"),
            fx_float::<4>(&outputs, "boundary"),
            fx_int(fx, "labels"),
            fx_float::<3>(fx, "bd_gt"),
        )
        .unwrap_err();
    assert!(matches!(err, LossError::ShapeMismatch { .. }), "{err}");
}

#[test]
fn f64_heads_reproduce_the_f64_references() {
    // The model run in f64 (`outputs_f64`), upsampled and reduced in f64 by our loss, against
    // the official stack run in f64: agreement to ~1e-9 shows the f32 residuals above are
    // rounding, not a formula difference.
    let fx = fullloss_fixture();
    let outputs = Fixture::load("pidnet_s/train/outputs_f64.safetensors").expect("f64 outputs");
    let head = |key: &str| -> Tensor<B, 4> {
        Tensor::from_data(outputs.data(key).unwrap(), (&device(), DType::F64))
    };
    let out = official()
        .forward(
            head("p_aux"),
            head("main"),
            head("boundary"),
            fx_int(fx, "labels"),
            fx_float::<3>(fx, "bd_gt"),
        )
        .unwrap();
    assert_eq!(out.total.dtype(), DType::F64);
    assert_scalar(out.semantic(), fx, "loss_s_mean_f64", 1e-8);
    assert_scalar(out.boundary.clone(), fx, "loss_b_f64", 1e-8);
    assert_scalar(out.bas.clone(), fx, "loss_sb_f64", 1e-8);
    assert_scalar(out.total, fx, "total_loss_f64", 1e-8);
}

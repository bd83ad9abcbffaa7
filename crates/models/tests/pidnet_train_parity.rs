//! Train-mode parity of PIDNet-S: batch-statistics outputs, gradients (f32 and f64 against
//! PyTorch's f64) and BatchNorm running statistics after one step.
//!
//! Gradients with more than 4096 values are stored as a strided sample (`sample_index.<key>`)
//! plus the whole tensor's sum and sum of squares: the rel-L2 bound is checked on the sample,
//! and the whole tensor's norm and sum within what that bound implies.
//!
//! With `--features wgpu` the two f32 checks also run on Burn's wgpu backend (adapter 0; Mesa's
//! lavapipe in CI), with the same bounds: the GPU path trains on PyTorch's gradients too.

use std::collections::BTreeMap;

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Tensor};
use segburn_models::fixtures::{
    cast_module, fixture_path, gradients_by_key, max_abs_diff, rel_l2, tensor_values, Fixture,
};
use segburn_models::pidnet::{
    load_pidnet, official_key, pidnet_state_dict, LoadMode, PidNet, PidNetConfig, PidNetSize,
};

type AD = Autodiff<Flex>;

/// How far each f32 gradient may be from the f64 oracle: a multiple of PyTorch's own f32 error
/// on the same parameter (rel-L2 of its f32 gradient against its f64 one, over the whole
/// tensor), the worst over valid f32 executions of the step (`relerr_worst.<key>` /
/// `relerr_rw_worst.<key>`: 2 threads, 1 thread, channels-last, oneDNN off, and the input one
/// f32 rounding off in 28 fixed ways). These train-mode gradients are dominated by a few ReLU
/// inputs within rounding of 0 whose flip the 2-sample BatchNorm backward amplifies, so one
/// run's error is a heavy-tailed draw: PyTorch's own moves 3-45× between those executions, up
/// to 3.6e-2. With 8 executions (4 input perturbations) the worst was still growing: segburn
/// stood at 1.02× / 1.37× of that bound on one parameter each, and at 0.37× / 0.34× of the
/// bound over these 32. A floor keeps parameters whose PyTorch f32 is nearly exact from
/// demanding more than f32 can give.
const TIMES_PYTORCH_F32_NOISE: f64 = 3.0;
const NOISE_FLOOR: f64 = 1e-6;

/// Parameters whose true gradient is 0 (a bias straight into a train-mode BN).
const ZERO_GRAD: [&str; 4] = [
    "conv1.0.bias",
    "conv1.3.bias",
    "dfm.conv_p.1.bias",
    "dfm.conv_i.1.bias",
];

fn load_model() -> PidNet<AD> {
    load_model_on::<AD>(&Default::default())
}

fn load_model_on<B: AutodiffBackend>(device: &B::Device) -> PidNet<B> {
    let weights = fixture_path("pidnet_s/state_dict.safetensors").unwrap();
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(device);
    load_pidnet(model, &weights, LoadMode::Strict).unwrap().0
}

fn gradients<B: AutodiffBackend>(
    model: &PidNet<B>,
    grads: &B::Gradients,
    keys: &[String],
) -> BTreeMap<String, Vec<f64>> {
    let found = gradients_by_key(model, grads, keys, official_key);
    assert_eq!(
        found.len(),
        keys.len(),
        "a wanted parameter has no gradient"
    );
    found
}

fn step_keys(step: &Fixture, prefix: &str) -> Vec<String> {
    step.tensors()
        .keys()
        .filter_map(|k| k.strip_prefix(prefix).map(str::to_string))
        .collect()
}

/// `values` at the stored sample indices of `key` (`sample_index.<key>`), or all of them when
/// the fixture holds the whole tensor.
fn compared(fx: &Fixture, key: &str, values: &[f64]) -> Vec<f64> {
    match fx.tensors().get(&format!("sample_index.{key}")) {
        Some(index) => index.iter::<i64>().map(|i| values[i as usize]).collect(),
        None => values.to_vec(),
    }
}

/// Checks the whole tensor `ours` against the stored sum and sum of squares of `{prefix}{key}`:
/// |‖a‖ − ‖b‖| ≤ ‖a − b‖ and |Σa − Σb| ≤ √n·‖a − b‖, so both follow from a rel-L2 ≤ `bound`.
fn check_sums(fx: &Fixture, prefix: &str, key: &str, ours: &[f64], bound: f64) {
    let stored = |what: &str| fx.values_f64(&format!("{what}.{prefix}{key}")).unwrap()[0];
    let (norm, sum) = (stored("sumsq").sqrt(), stored("sum"));
    let our_norm = ours.iter().map(|v| v * v).sum::<f64>().sqrt();
    let our_sum: f64 = ours.iter().sum();
    let norm_err = (our_norm - norm).abs() / norm;
    assert!(
        norm_err <= bound,
        "{prefix}{key}: whole-tensor norm off by {norm_err:e} > {bound:e}"
    );
    let sum_bound = bound * (ours.len() as f64).sqrt() * norm;
    assert!(
        (our_sum - sum).abs() <= sum_bound,
        "{prefix}{key}: whole-tensor sum {our_sum} vs {sum} (bound {sum_bound:e})"
    );
}

/// Checks every gradient against `{prefix}{key}` (an f64 oracle), each within `bound(key)`;
/// the zero-gradient parameters against 0 within `abs_zero`.
fn check_gradients(
    found: &BTreeMap<String, Vec<f64>>,
    step: &Fixture,
    prefix: &str,
    bound: &dyn Fn(&str) -> f64,
    abs_zero: f64,
) {
    let mut worst = (String::new(), 0.0f64);
    let mut failed = Vec::new();
    for (key, whole) in found {
        let oracle = step.values_f64(&format!("{prefix}{key}")).unwrap();
        let ours = compared(step, key, whole);
        if ZERO_GRAD.contains(&key.as_str()) {
            let err = max_abs_diff(&ours, &oracle);
            assert!(
                err <= abs_zero,
                "{key}: zero-gradient parameter off by {err:e}"
            );
            continue;
        }
        let (err, limit) = (rel_l2(&ours, &oracle), bound(key));
        println!(
            "{prefix}{key:<30} rel-L2 {err:.2e}, bound {limit:.2e} ({:.2})",
            err / limit
        );
        if err > limit {
            failed.push(format!("{prefix}{key}: rel-L2 {err:e} > {limit:e}"));
        }
        check_sums(step, prefix, key, whole, limit);
        if err / limit > worst.1 {
            worst = (key.clone(), err / limit);
        }
    }
    println!(
        "{prefix}: {} gradients, worst rel-L2 {:.2} of its bound ({})",
        found.len(),
        worst.1,
        worst.0
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// [`TIMES_PYTORCH_F32_NOISE`] × PyTorch's worst f32 error on `key` (`{relerr}.{key}`).
fn pytorch_noise_bound<'a>(step: &'a Fixture, relerr: &'a str) -> impl Fn(&str) -> f64 + 'a {
    move |key| {
        let torch = step.values_f64(&format!("{relerr}.{key}")).unwrap()[0];
        (TIMES_PYTORCH_F32_NOISE * torch).max(NOISE_FLOOR)
    }
}

fn sum_of_means<B: AutodiffBackend>(out: &segburn_models::pidnet::PidNetOutput<B>) -> Tensor<B, 1> {
    out.p_aux.clone().mean() + out.main.clone().mean() + out.boundary.clone().mean()
}

#[test]
fn train_mode_outputs_gradients_and_running_statistics_match_f32() {
    train_mode_f32_on::<AD>(&Default::default());
}

#[test]
fn train_mode_reweighted_loss_gradients_match_f32() {
    reweighted_f32_on::<AD>(&Default::default());
}

#[cfg(feature = "wgpu")]
mod on_wgpu {
    use burn::backend::{wgpu::WgpuDevice, Autodiff, Wgpu};

    #[test]
    fn train_mode_outputs_gradients_and_running_statistics_match_f32() {
        super::train_mode_f32_on::<Autodiff<Wgpu>>(&WgpuDevice::DefaultDevice);
    }

    #[test]
    fn train_mode_reweighted_loss_gradients_match_f32() {
        super::reweighted_f32_on::<Autodiff<Wgpu>>(&WgpuDevice::DefaultDevice);
    }
}

fn train_mode_f32_on<B: AutodiffBackend>(device: &B::Device) {
    let model = load_model_on::<B>(device);
    let input: Tensor<B, 4> = Fixture::load("pidnet_s/train/input.safetensors")
        .unwrap()
        .float("input", device)
        .unwrap();
    let out = model.forward(input).unwrap();

    let expected = Fixture::load("pidnet_s/train/outputs_f64.safetensors").unwrap();
    for (name, t) in [
        ("p_aux", &out.p_aux),
        ("main", &out.main),
        ("boundary", &out.boundary),
    ] {
        let err = max_abs_diff(
            &tensor_values(t.clone()),
            &expected.values_f64(name).unwrap(),
        );
        println!("train-mode {name}: max abs error vs f64 {err:e}");
        assert!(err <= 1e-3, "train-mode {name} differs by {err:e}");
    }

    let step = Fixture::load("pidnet_s/train/step.safetensors").unwrap();
    let loss = sum_of_means(&out);
    let loss_value = tensor_values(loss.clone())[0];
    let reference = step.values_f64("loss_f64").unwrap()[0];
    println!("f32 loss {loss_value} vs f64 {reference}");
    assert!(
        ((loss_value - reference) / reference).abs() <= 1e-5,
        "loss {loss_value} vs {reference}"
    );
    // Running statistics after the forward pass: momentum 0.1, unbiased variance, counter + 1.
    let state = pidnet_state_dict(&model);
    let mut checked = 0;
    let mut worst = 0.0f64;
    for key in step_keys(&step, "bn_after.") {
        let ours: Vec<f64> = state[&key].iter::<f64>().collect();
        let err = max_abs_diff(&ours, &step.values_f64(&format!("bn_after.{key}")).unwrap());
        assert!(err <= 1e-4, "{key} after one step differs by {err:e}");
        worst = worst.max(err);
        checked += 1;
    }
    assert_eq!(checked, 15);
    println!("running statistics after the step: worst max abs {worst:e}");
    let grads = loss.backward();
    let keys = step_keys(&step, "grad64.");
    assert_eq!(keys.len(), 23);
    let found = gradients(&model, &grads, &keys);
    check_gradients(
        &found,
        &step,
        "grad64.",
        &pytorch_noise_bound(&step, "relerr_worst"),
        1e-4,
    );
}

fn reweighted_f32_on<B: AutodiffBackend>(device: &B::Device) {
    let model = load_model_on::<B>(device);
    let input: Tensor<B, 4> = Fixture::load("pidnet_s/train/input.safetensors")
        .unwrap()
        .float("input", device)
        .unwrap();
    let out = model.forward(input).unwrap();
    let step = Fixture::load("pidnet_s/train/step.safetensors").unwrap();
    let weighted =
        |t: &Tensor<B, 4>, key: &str| (t.clone() * step.float::<B, 4>(key, device).unwrap()).mean();
    let loss = weighted(&out.p_aux, "R.p_aux")
        + weighted(&out.main, "R.main")
        + weighted(&out.boundary, "R.boundary");
    let grads = loss.backward();
    let keys = step_keys(&step, "grad_rw64.");
    assert_eq!(keys.len(), 23);
    let found = gradients(&model, &grads, &keys);
    check_gradients(
        &found,
        &step,
        "grad_rw64.",
        &pytorch_noise_bound(&step, "relerr_rw_worst"),
        1e-4,
    );
}

#[test]
fn train_mode_gradients_in_f64_match_the_f64_oracle() {
    let device = Default::default();
    let model = cast_module(load_model(), DType::F64);
    let input: Tensor<AD, 4> = Fixture::load("pidnet_s/train/input.safetensors")
        .unwrap()
        .float::<AD, 4>("input", &device)
        .unwrap()
        .cast(DType::F64);
    let out = model.forward(input).unwrap();
    assert_eq!(out.main.dtype(), DType::F64);
    let step = Fixture::load("pidnet_s/train/step.safetensors").unwrap();
    let loss = sum_of_means(&out);
    let loss_value = tensor_values(loss.clone())[0];
    let reference = step.values_f64("loss_f64").unwrap()[0];
    println!("f64 loss {loss_value} vs {reference}");
    assert!((loss_value - reference).abs() <= 1e-10);
    let grads = loss.backward();
    let keys = step_keys(&step, "grad64.");
    check_gradients(
        &gradients(&model, &grads, &keys),
        &step,
        "grad64.",
        &|_| 1e-8,
        1e-10,
    );
}

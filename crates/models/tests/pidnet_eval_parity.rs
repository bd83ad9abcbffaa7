//! Eval-mode parity of PIDNet-S with the official PyTorch model (`tests/fixtures/pidnet_s`),
//! layer by layer.
//!
//! Each tensor must be within 1e-3 max abs of PyTorch's f32 result (as before the fixtures moved
//! into the repository; logits up to |7|, PyTorch's own f32-vs-f64 error ≤ 1.4e-4 on every
//! tensor) and, in addition, within [`TIMES_PYTORCH_F32_NOISE`] × PyTorch's own f32-vs-f64
//! rel-L2 on that tensor, which no wrong element of any size passes. The BatchNorm running
//! statistics are calibrated to the activations (`state_dict.overrides.safetensors`, see
//! `tests/fixtures/pidnet_s/README.md`): with the formula's own, eval-mode logits reached the
//! thousands and the sigmoid gates saturated.

use burn::backend::Flex;
use burn::tensor::Tensor;
use segburn_models::fixtures::{fixture_path, max_abs_diff, rel_l2, tensor_values, Fixture};
use segburn_models::pidnet::{load_pidnet, LoadMode, PidNetConfig, PidNetSize};

type B = Flex;

/// The bounds per tensor in multiples of PyTorch's own f32 error, as for the gradients.
const TIMES_PYTORCH_F32_NOISE: f64 = 3.0;

/// The max abs bound (the fixtures README's since the first fixtures).
const ABS_BOUND: f64 = 1e-3;

/// The smallest rel-L2 bound.
const REL_FLOOR: f64 = 1e-7;

/// Prefix of the stored PyTorch f32-vs-f64 errors of the intermediates
/// (`f32_vs_f64.{max_abs,rel_l2}.<name>`).
const NOISE: &str = "f32_vs_f64.";

#[test]
fn eval_outputs_and_every_intermediate_match_official() {
    let device = Default::default();
    let weights = fixture_path("pidnet_s/state_dict.safetensors").unwrap();
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&device);
    let (model, report) = load_pidnet(model, &weights, LoadMode::Strict).expect("strict load");
    assert_eq!(report.loaded.len(), 479, "{report}");

    let input: Tensor<B, 4> = Fixture::load("pidnet_s/input.safetensors")
        .unwrap()
        .float("input", &device)
        .unwrap();
    let mut taps = Vec::new();
    let out = model
        .forward_tapped(input, &mut |name, t| {
            taps.push((name, tensor_values(t.clone())))
        })
        .unwrap();

    let intermediates = Fixture::load("pidnet_s/intermediates.safetensors").unwrap();
    let stored = intermediates
        .tensors()
        .keys()
        .filter(|k| !k.starts_with(NOISE))
        .count();
    assert_eq!(taps.len(), stored, "every intermediate is tapped");
    assert_eq!(taps.len(), 23);
    for (name, ours) in &taps {
        let reference = intermediates.values_f64(name).unwrap();
        let noise = |what: &str| {
            intermediates
                .values_f64(&format!("{NOISE}{what}.{name}"))
                .unwrap()[0]
        };
        check(name, ours, &reference, noise("max_abs"), noise("rel_l2"));
    }

    let expected = Fixture::load("pidnet_s/outputs.safetensors").unwrap();
    let expected_f64 = Fixture::load("pidnet_s/outputs_f64.safetensors").unwrap();
    for (name, ours) in [
        ("p_aux", out.p_aux),
        ("main", out.main),
        ("boundary", out.boundary),
    ] {
        let reference = expected.values_f64(name).unwrap();
        let oracle = expected_f64.values_f64(name).unwrap();
        let (abs, rel) = (
            max_abs_diff(&reference, &oracle),
            rel_l2(&reference, &oracle),
        );
        check(name, &tensor_values(ours), &reference, abs, rel);
    }
}

/// Checks `ours` against PyTorch's f32 `reference`, on which PyTorch's own f32-vs-f64 error is
/// `pytorch_abs` (max abs) and `pytorch_rel` (rel-L2).
fn check(name: &str, ours: &[f64], reference: &[f64], pytorch_abs: f64, pytorch_rel: f64) {
    let (abs, rel) = (max_abs_diff(ours, reference), rel_l2(ours, reference));
    let abs_bound = ABS_BOUND;
    let rel_bound = (TIMES_PYTORCH_F32_NOISE * pytorch_rel).max(REL_FLOOR);
    println!(
        "{name:<13} max abs {abs:.2e} (PyTorch {pytorch_abs:.2e}, bound {abs_bound:.1e}), \
         rel-L2 {rel:.2e} (PyTorch {pytorch_rel:.2e}, bound {rel_bound:.1e})"
    );
    assert!(abs <= abs_bound, "{name}: max abs {abs:e} > {abs_bound:e}");
    assert!(rel <= rel_bound, "{name}: rel-L2 {rel:e} > {rel_bound:e}");
}

#[test]
fn inference_graph_matches_training_graph_main_output() {
    let device = Default::default();
    let weights = fixture_path("pidnet_s/state_dict.safetensors").unwrap();
    let full = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&device);
    let (full, _) = load_pidnet(full, &weights, LoadMode::Strict).unwrap();
    // The inference graph has no aux heads and ignores their keys in the file.
    let lean = PidNetConfig::new(PidNetSize::S, 19)
        .with_augment(false)
        .init::<B>(&device);
    let (lean, report) = load_pidnet(lean, &weights, LoadMode::Strict).unwrap();
    assert_eq!(report.loaded.len(), 453);

    let input: Tensor<B, 4> = Fixture::load("pidnet_s/input.safetensors")
        .unwrap()
        .float("input", &device)
        .unwrap();
    let a = tensor_values(full.forward(input.clone()).unwrap().main);
    let b = tensor_values(lean.infer(input).unwrap());
    assert_eq!(a, b);
}

#[test]
fn input_not_divisible_by_eight_is_a_clear_error() {
    let device = Default::default();
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&device);
    let input = Tensor::<B, 4>::zeros([1, 3, 60, 64], &device);
    let err = model.forward(input).unwrap_err().to_string();
    assert!(err.contains("60×64") && err.contains("64×64"), "{err}");
    let grey = Tensor::<B, 4>::zeros([1, 1, 64, 64], &device);
    assert!(model
        .infer(grey)
        .unwrap_err()
        .to_string()
        .contains("1 channels"));
}

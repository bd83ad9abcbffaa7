//! Eval-mode parity of PIDNet-S with the official PyTorch model (shared fixtures), layer by layer.

use std::path::Path;

use burn::backend::Flex;
use burn::tensor::Tensor;
use segburn_models::fixtures::{fixtures_dir, max_abs_diff, tensor_values, Fixture};
use segburn_models::pidnet::{load_pidnet, LoadMode, PidNetConfig, PidNetSize};

type B = Flex;

#[test]
fn eval_outputs_and_every_intermediate_match_official() {
    let device = Default::default();
    let weights = fixtures_dir()
        .join("pidnet_s")
        .join("state_dict.safetensors");
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
    assert_eq!(
        taps.len(),
        intermediates.tensors().len(),
        "every intermediate is tapped"
    );
    let mut worst = (String::new(), 0.0f64);
    for (name, ours) in &taps {
        let reference = intermediates.values_f64(name).unwrap();
        let err = max_abs_diff(ours, &reference);
        assert!(err <= 1e-3, "intermediate `{name}` differs by {err:e}");
        if err > worst.1 {
            worst = (name.to_string(), err);
        }
    }
    println!("worst intermediate: {} max abs {:e}", worst.0, worst.1);

    let expected = Fixture::load("pidnet_s/outputs.safetensors").unwrap();
    for (name, ours) in [
        ("p_aux", out.p_aux),
        ("main", out.main),
        ("boundary", out.boundary),
    ] {
        let err = max_abs_diff(&tensor_values(ours), &expected.values_f64(name).unwrap());
        println!("{name}: max abs error {err:e}");
        assert!(err <= 1e-3, "{name} differs by {err:e}");
    }
}

#[test]
fn inference_graph_matches_training_graph_main_output() {
    let device = Default::default();
    let weights = fixtures_dir()
        .join("pidnet_s")
        .join("state_dict.safetensors");
    let full = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&device);
    let (full, _) = load_pidnet(full, &weights, LoadMode::Strict).unwrap();
    // The inference graph has no aux heads and ignores their keys in the file.
    let lean = PidNetConfig::new(PidNetSize::S, 19)
        .with_augment(false)
        .init::<B>(&device);
    let (lean, report) = load_pidnet(lean, Path::new(&weights), LoadMode::Strict).unwrap();
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

//! segburn on Burn's wgpu backend (any Vulkan / DirectX 12 / Metal GPU; in CI, Mesa's software
//! Vulkan `lavapipe`), at small sizes: every kernel dispatch falls through to Burn's ops there
//! (a Flex-only kernel reached with a wgpu tensor would stop the test), with values and input
//! gradients against the CPU, and PIDNet-S matches the official fixture on the GPU.
//!
//! Built only with `--features wgpu` (`.ci/run` runs it); it needs a wgpu adapter, and says how
//! to get one when there is none.
#![cfg(feature = "wgpu")]

use burn::backend::wgpu::WgpuDevice;
use burn::backend::{Autodiff, Flex, Wgpu};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use burn::tensor::{Tensor, TensorData};
use segburn::device::wgpu_probe::{probe_wgpu, wgpu_device};
use segburn_kernels::accuracy::{rel_l2, tensor_values, test_values};
use segburn_models::fixtures::{fixture_path, max_abs_diff, Fixture};
use segburn_models::pidnet::{load_pidnet, LoadMode, PidNetConfig, PidNetSize};

type Cpu = Autodiff<Flex>;
type Gpu = Autodiff<Wgpu>;

/// Adapter 0, as `Wgpu(0)` picks it.
fn gpu() -> WgpuDevice {
    let adapters = probe_wgpu();
    assert!(
        !adapters.is_empty(),
        "no wgpu adapter: install a Vulkan driver (without a GPU: apt install mesa-vulkan-drivers \
         libvulkan1) to run the wgpu tests"
    );
    wgpu_device(&adapters, 0).expect("adapter 0 is selectable")
}

/// The same values as a tracked tensor on `B`.
fn tensor<B: AutodiffBackend, const D: usize>(
    shape: [usize; D],
    seed: u64,
    device: &B::Device,
) -> Tensor<B, D> {
    let len = shape.iter().product();
    let values: Vec<f32> = test_values(len, seed).iter().map(|&v| v as f32).collect();
    Tensor::<B, D>::from_data(TensorData::new(values, shape), device).require_grad()
}

/// An op's output and the gradients of `sum(out * g)` with respect to its inputs.
type Outcome = (Vec<f64>, Vec<Vec<f64>>);

/// Runs `op` on inputs of `shapes` on `B`, returning its output and the input gradients.
fn run<B: AutodiffBackend, const D: usize, const O: usize>(
    shapes: &[[usize; D]],
    device: &B::Device,
    op: impl Fn(Vec<Tensor<B, D>>) -> Tensor<B, O>,
) -> Outcome {
    let inputs: Vec<Tensor<B, D>> = shapes
        .iter()
        .enumerate()
        .map(|(i, &shape)| tensor::<B, D>(shape, 11 + i as u64, device))
        .collect();
    let out = op(inputs.clone());
    let upstream = tensor::<B, O>(out.dims(), 99, device).detach();
    let grads = (out.clone() * upstream).sum().backward();
    let input_grads = inputs
        .iter()
        .map(|x| tensor_values(x.grad(&grads).expect("every input gets a gradient")))
        .collect();
    (tensor_values(out.inner()), input_grads)
}

/// The same op on the CPU and on the GPU: values and gradients within f32 noise.
fn check<const D: usize, const O: usize>(
    name: &str,
    shapes: &[[usize; D]],
    op_cpu: impl Fn(Vec<Tensor<Cpu, D>>) -> Tensor<Cpu, O>,
    op_gpu: impl Fn(Vec<Tensor<Gpu, D>>) -> Tensor<Gpu, O>,
) {
    let (cpu_out, cpu_grads) = run(shapes, &Default::default(), op_cpu);
    let (gpu_out, gpu_grads) = run(shapes, &gpu(), op_gpu);
    assert!(
        !cpu_out.is_empty() && gpu_out.len() == cpu_out.len(),
        "{name}: output sizes"
    );
    let out_error = rel_l2(&gpu_out, &cpu_out);
    println!("{name}: output rel-L2 {out_error:.1e}");
    assert!(out_error <= 1e-6, "{name}: output rel-L2 {out_error:e}");
    for (i, (g, c)) in gpu_grads.iter().zip(&cpu_grads).enumerate() {
        assert!(
            !c.is_empty() && g.len() == c.len(),
            "{name}: gradient {i} sizes"
        );
        let error = rel_l2(g, c);
        println!("{name}: gradient {i} rel-L2 {error:.1e}");
        assert!(
            error <= 1e-6,
            "{name}: gradient of input {i}: rel-L2 {error:e}"
        );
    }
}

/// Each public dispatch of `segburn_kernels`, forward and backward.
#[test]
fn every_kernel_dispatch_falls_through_to_burns_ops_on_wgpu() {
    macro_rules! both {
        ($name:expr, $shapes:expr, |$x:ident| $body:expr) => {
            check(
                $name,
                $shapes,
                |$x: Vec<Tensor<Cpu, _>>| $body,
                |$x: Vec<Tensor<Gpu, _>>| $body,
            )
        };
    }
    let options = ConvOptions::new([2, 1], [1, 1], [1, 1], 1);
    both!("conv2d", &[[2, 3, 9, 8], [4, 3, 3, 3]], |x| {
        segburn_kernels::conv2d(x[0].clone(), x[1].clone(), None, options.clone())
    });
    // A strided 1×1 (PIDNet's downsampling shortcuts): burn-cubecl's own input gradient is
    // zero there (see `strided_one_by_one_input_gradient_of_burn_cubecl`).
    let shortcut = ConvOptions::new([2, 2], [0, 0], [1, 1], 1);
    both!("conv2d 1x1 stride 2", &[[1, 4, 7, 8], [6, 4, 1, 1]], |x| {
        segburn_kernels::conv2d(x[0].clone(), x[1].clone(), None, shortcut.clone())
    });
    both!(
        "conv2d 1x1 stride 2x1 padded",
        &[[1, 4, 6, 6], [4, 4, 1, 1]],
        |x| { segburn_kernels::conv2d(x[0].clone(), x[1].clone(), None, options.clone()) }
    );
    both!("conv2d_then relu", &[[1, 4, 6, 6], [4, 4, 1, 1]], |x| {
        let after = segburn_kernels::AfterConv::relu();
        segburn_kernels::conv2d_then(x[0].clone(), x[1].clone(), None, options.clone(), after)
    });
    let transpose = ConvTransposeOptions::new([2, 2], [0, 0], [0, 0], [1, 1], 1);
    both!("conv_transpose2d", &[[1, 4, 5, 5], [4, 2, 2, 2]], |x| {
        segburn_kernels::conv_transpose2d(x[0].clone(), x[1].clone(), None, transpose.clone())
    });
    for align_corners in [false, true] {
        both!("bilinear", &[[1, 2, 7, 5]], |x| {
            segburn_kernels::interpolate_bilinear(x[0].clone(), [16, 9], align_corners)
        });
    }
    both!("gelu", &[[3, 5, 7]], |x| segburn_kernels::gelu(
        x[0].clone()
    ));
    both!("permute", &[[2, 3, 4]], |x| segburn_kernels::permute(
        x[0].clone(),
        [2, 0, 1]
    ));
    both!("linear", &[[6, 8], [5, 8]], |x| {
        segburn_kernels::linear(x[0].clone(), x[1].clone(), None)
    });
    both!("copy_2d", &[[4, 6]], |x| segburn_kernels::copy_2d(
        x[0].clone()
    ));
    both!("attention", &[[2, 5, 8], [2, 7, 8], [2, 7, 8]], |x| {
        segburn_kernels::multi_head_attention(x[0].clone(), x[1].clone(), x[2].clone(), 2)
    });
    both!("channel_dot", &[[1, 3, 4, 5], [1, 3, 4, 5]], |x| {
        segburn_kernels::channel_dot(x[0].clone(), x[1].clone())
    });
    both!(
        "gate_blend",
        &[[1, 3, 4, 5], [1, 3, 4, 5], [1, 1, 4, 5]],
        |x| { segburn_kernels::gate_blend(x[0].clone(), x[1].clone(), x[2].clone()) }
    );
    // The norm kernels are CPU-training only: off the CPU they decline, and the model's
    // Burn-op path takes over.
    let device = gpu();
    let x = tensor::<Gpu, 3>([2, 3, 4], 1, &device);
    let (w, b) = (Tensor::ones([4], &device), Tensor::zeros([4], &device));
    assert!(segburn_kernels::layer_norm(x, w, b, 2, 1e-6).is_none());
}

/// PIDNet-S (eval mode, official formula weights) on the GPU against the official f32 outputs,
/// with the CPU test's bounds (`crates/models/tests/pidnet_eval_parity.rs`): max abs 1e-3 and
/// rel-L2 within 3× PyTorch's own f32-vs-f64 error.
#[test]
fn pidnet_s_matches_the_official_outputs_on_wgpu() {
    let device = gpu();
    let weights = fixture_path("pidnet_s/state_dict.safetensors").unwrap();
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<Wgpu>(&device);
    let (model, report) = load_pidnet(model, &weights, LoadMode::Strict).expect("strict load");
    assert_eq!(report.loaded.len(), 479, "{report}");
    let input: Tensor<Wgpu, 4> = Fixture::load("pidnet_s/input.safetensors")
        .unwrap()
        .float("input", &device)
        .unwrap();
    let out = model.forward(input).unwrap();
    let expected = Fixture::load("pidnet_s/outputs.safetensors").unwrap();
    let oracle = Fixture::load("pidnet_s/outputs_f64.safetensors").unwrap();
    for (name, ours) in [
        ("p_aux", out.p_aux),
        ("main", out.main),
        ("boundary", out.boundary),
    ] {
        let ours = tensor_values(ours);
        let reference = expected.values_f64(name).unwrap();
        let pytorch_rel = rel_l2(&reference, &oracle.values_f64(name).unwrap());
        let (abs, rel) = (max_abs_diff(&ours, &reference), rel_l2(&ours, &reference));
        let rel_bound = (3.0 * pytorch_rel).max(1e-7);
        println!("{name}: max abs {abs:.2e}, rel-L2 {rel:.2e} (bound {rel_bound:.1e})");
        assert!(
            abs <= 1e-3 && rel <= rel_bound,
            "{name}: max abs {abs:e}, rel-L2 {rel:e}"
        );
    }
}

/// The burn-cubecl 0.21 defect segburn works around (`segburn_kernels`' strided 1×1 path):
/// Burn's own `conv2d` on wgpu gives a zero input gradient for a 1×1 kernel with stride 2. If
/// this starts failing, Burn fixed it and the workaround can go.
#[test]
fn strided_one_by_one_input_gradient_of_burn_cubecl() {
    let options = ConvOptions::new([2, 2], [0, 0], [1, 1], 1);
    let conv = |x: Vec<Tensor<Gpu, 4>>| {
        burn::tensor::module::conv2d(x[0].clone(), x[1].clone(), None, options.clone())
    };
    let (_, grads) = run(&[[1, 4, 8, 8], [4, 4, 1, 1]], &gpu(), conv);
    let (_, cpu_grads) = run(&[[1, 4, 8, 8], [4, 4, 1, 1]], &Default::default(), |x| {
        burn::tensor::module::conv2d::<Cpu>(x[0].clone(), x[1].clone(), None, options.clone())
    });
    assert!(cpu_grads[0].iter().any(|&v| v != 0.0));
    assert!(
        grads[0].iter().all(|&v| v == 0.0),
        "burn-cubecl's strided 1×1 input gradient is no longer zero"
    );
    assert!(
        rel_l2(&grads[1], &cpu_grads[1]) <= 1e-5,
        "the weight gradient is right"
    );
}

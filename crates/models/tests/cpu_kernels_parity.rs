//! segburn's CPU kernels against Burn's reference ops on `Autodiff<Flex>`: the convolution
//! through `nn::kernels::conv2d` (our input and weight gradients) and through
//! `burn::tensor::module::conv2d` (Burn's), values and all three gradients, on odd shapes,
//! strides, padding, dilation and groups, in f64 and f32; the bilinear resize through
//! `nn::kernels::interpolate_bilinear` and `burn::tensor::module::interpolate`, values and
//! input gradients, up and down, non-integer ratios, output size 1, both `align_corners`; the
//! same forward kernels without autodiff (inference), the class log-probabilities of the loss
//! (`nn::kernels::class_log_probs`) against Burn's `exp`/`sum_dim`/`log`/`gather`, and the
//! batch norm folded into the convolution in inference, the residual and ReLU fused into it,
//! and PagFM's pixel gate (channel dot product and blend) in inference and training.

use burn::backend::{Autodiff, Flex};
use burn::tensor::ops::{ConvOptions, InterpolateMode, InterpolateOptions};
use burn::tensor::{DType, Int, Tensor, TensorData};
use segburn_models::fixtures::{rel_l2, tensor_values};
use segburn_models::nn::kernels;

type AD = Autodiff<Flex>;

struct Case {
    input: [usize; 4],
    out_channels: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
    bias: bool,
}

const CASES: [Case; 6] = [
    // PIDNet's stem: 3 channels, stride 2, 3×3, odd size.
    Case {
        input: [2, 3, 33, 27],
        out_channels: 8,
        kernel: [3, 3],
        stride: [2, 2],
        padding: [1, 1],
        dilation: [1, 1],
        groups: 1,
        bias: false,
    },
    // A head's 1×1 with bias (no unfolding).
    Case {
        input: [2, 7, 16, 9],
        out_channels: 1,
        kernel: [1, 1],
        stride: [1, 1],
        padding: [0, 0],
        dilation: [1, 1],
        groups: 1,
        bias: true,
    },
    // PAPPM's grouped 3×3.
    Case {
        input: [1, 12, 10, 11],
        out_channels: 12,
        kernel: [3, 3],
        stride: [1, 1],
        padding: [1, 1],
        dilation: [1, 1],
        groups: 4,
        bias: false,
    },
    // Dilation and wide padding.
    Case {
        input: [2, 4, 13, 13],
        out_channels: 5,
        kernel: [3, 3],
        stride: [1, 1],
        padding: [2, 2],
        dilation: [2, 2],
        groups: 1,
        bias: true,
    },
    // Rectangular kernel, mixed strides, no padding.
    Case {
        input: [1, 3, 12, 17],
        out_channels: 6,
        kernel: [2, 5],
        stride: [1, 3],
        padding: [0, 1],
        dilation: [1, 1],
        groups: 1,
        bias: false,
    },
    // SAM2's patch embedding shape: 7×7, stride 4, padding 3.
    Case {
        input: [1, 3, 31, 29],
        out_channels: 4,
        kernel: [7, 7],
        stride: [4, 4],
        padding: [3, 3],
        dilation: [1, 1],
        groups: 1,
        bias: true,
    },
];

/// A tensor of fixed pseudo-random values in [-1, 1) (not Burn's global RNG, which tests running
/// in parallel would share).
fn fixed<const D: usize>(shape: [usize; D], seed: u64, dtype: DType) -> Tensor<AD, D> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let values: Vec<f64> = (0..shape.iter().product::<usize>())
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect();
    Tensor::<AD, D>::from_data(TensorData::new(values, shape), &Default::default()).cast(dtype)
}

/// Output, input gradient, weight gradient and bias gradient of `sum(conv(x) · r)`.
fn run(case: &Case, dtype: DType, ours: bool) -> [Vec<f64>; 4] {
    let c = case.input[1];
    let x = fixed(case.input, 1, dtype).require_grad();
    let weight_shape = [
        case.out_channels,
        c / case.groups,
        case.kernel[0],
        case.kernel[1],
    ];
    let weight = fixed(weight_shape, 2, dtype).require_grad();
    let bias = case
        .bias
        .then(|| fixed([case.out_channels], 3, dtype).require_grad());
    let options = ConvOptions::new(case.stride, case.padding, case.dilation, case.groups);
    let out = if ours {
        kernels::conv2d(x.clone(), weight.clone(), bias.clone(), options)
    } else {
        burn::tensor::module::conv2d(x.clone(), weight.clone(), bias.clone(), options)
    };
    let r = fixed(out.dims(), 4, dtype);
    let grads = (out.clone() * r).sum().backward();
    let grad = |t: &Tensor<AD, 4>| tensor_values(t.grad(&grads).expect("a gradient"));
    let bias_grad = bias.map_or_else(Vec::new, |b| {
        tensor_values(b.grad(&grads).expect("a gradient"))
    });
    [tensor_values(out), grad(&x), grad(&weight), bias_grad]
}

#[test]
fn own_kernels_match_burns_conv_in_f64_and_f32() {
    for case in &CASES {
        for (dtype, tol) in [(DType::F64, 1e-13), (DType::F32, 2e-6)] {
            let ours = run(case, dtype, true);
            let burn = run(case, dtype, false);
            for (what, (a, b)) in ["output", "input grad", "weight grad", "bias grad"]
                .iter()
                .zip(ours.iter().zip(&burn))
            {
                assert_eq!(a.len(), b.len(), "{what}");
                if a.is_empty() {
                    continue;
                }
                let err = rel_l2(a, b);
                assert!(
                    err <= tol,
                    "{what} {dtype:?} input {:?} kernel {:?}: rel-L2 {err:e} > {tol:e}",
                    case.input,
                    case.kernel
                );
            }
        }
    }
}

#[test]
fn training_on_flex_runs_our_weight_gradient() {
    // Same values within rounding, but not bit for bit: the sums run in another order, so
    // equality everywhere would mean the dispatch fell through to Burn's op.
    let differs = CASES
        .iter()
        .any(|case| run(case, DType::F32, true)[2] != run(case, DType::F32, false)[2]);
    assert!(
        differs,
        "nn::kernels::conv2d did not use its own weight gradient"
    );
}

/// Bilinear resizes: input `[N, C, H, W]` and output size.
const RESIZES: [([usize; 4], [usize; 2]); 8] = [
    ([2, 3, 7, 9], [19, 23]),   // upsampling, non-integer ratios
    ([1, 2, 8, 16], [64, 128]), // PIDNet's 1/8 -> full resolution
    ([2, 3, 17, 13], [5, 4]),   // downsampling, non-integer ratios
    ([1, 3, 6, 5], [1, 1]),     // output size 1
    ([1, 2, 1, 7], [4, 3]),     // input size 1 along one axis, down along the other
    ([2, 4, 9, 6], [9, 6]),     // same size
    ([1, 2, 5, 8], [12, 3]),    // up along one axis, down along the other
    ([2, 5, 32, 32], [64, 64]), // PIDNet's 1/16 -> 1/8
];

/// Output and input gradient of `sum(resize(x) · r)`.
fn run_resize(
    (input, size): ([usize; 4], [usize; 2]),
    align_corners: bool,
    dtype: DType,
    ours: bool,
) -> [Vec<f64>; 2] {
    let x = fixed(input, 1, dtype).require_grad();
    let out = if ours {
        kernels::interpolate_bilinear(x.clone(), size, align_corners)
    } else {
        let options =
            InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(align_corners);
        burn::tensor::module::interpolate(x.clone(), size, options)
    };
    let r = fixed(out.dims(), 4, dtype);
    let grads = (out.clone() * r).sum().backward();
    let grad = tensor_values(x.grad(&grads).expect("a gradient"));
    [tensor_values(out), grad]
}

/// Relative L2 error of `a` against `b`; infinite where either holds a NaN or an infinity.
fn finite_rel_l2(a: &[f64], b: &[f64]) -> f64 {
    if a.iter().chain(b).all(|v| v.is_finite()) {
        rel_l2(a, b)
    } else {
        f64::INFINITY
    }
}

#[test]
fn own_bilinear_matches_burns_interpolate_in_f64_and_f32() {
    // f64: both sum the same few products in another order, so only a few ulp apart. f32: an
    // output is 3 roundings of terms no larger than the inputs (≤ 1); an input gradient sums up
    // to 16 terms per axis at ×8 (with random signs, so the sum is smaller than its terms), each
    // rounding by up to 6e-8 in both implementations: a relative error of ~1e-6 at the most.
    for case in RESIZES {
        for align_corners in [false, true] {
            for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 2e-6)] {
                let ours = run_resize(case, align_corners, dtype, true);
                let burn = run_resize(case, align_corners, dtype, false);
                for (what, (a, b)) in ["output", "input grad"].iter().zip(ours.iter().zip(&burn)) {
                    assert_eq!(a.len(), b.len(), "{what}");
                    let err = finite_rel_l2(a, b);
                    println!("bilinear {case:?} align_corners={align_corners} {dtype:?} {what}: rel-L2 {err:.1e}");
                    assert!(
                        err <= tol,
                        "{what} {dtype:?} {case:?} align_corners={align_corners}: rel-L2 {err:e} > {tol:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn training_on_flex_runs_our_bilinear_resize() {
    // As for the convolution: equal within rounding, but not bit for bit (ours is separable).
    let case = RESIZES[0];
    let differs =
        run_resize(case, false, DType::F32, true) != run_resize(case, false, DType::F32, false);
    assert!(
        differs,
        "nn::kernels::interpolate_bilinear did not use its own kernels"
    );
}

/// A plain-Flex (inference) tensor with the values of [`fixed`].
fn fixed_plain<const D: usize>(shape: [usize; D], seed: u64, dtype: DType) -> Tensor<Flex, D> {
    fixed(shape, seed, dtype).inner()
}

/// The input, weight, bias and options of `case` on plain Flex (inference), from seeds
/// `seed`, `seed + 1`, `seed + 2`.
fn plain_conv_operands(
    case: &Case,
    seed: u64,
    dtype: DType,
) -> (
    Tensor<Flex, 4>,
    Tensor<Flex, 4>,
    Option<Tensor<Flex, 1>>,
    ConvOptions<2>,
) {
    let weight_shape = [
        case.out_channels,
        case.input[1] / case.groups,
        case.kernel[0],
        case.kernel[1],
    ];
    let bias = case
        .bias
        .then(|| fixed_plain([case.out_channels], seed + 2, dtype));
    (
        fixed_plain(case.input, seed, dtype),
        fixed_plain(weight_shape, seed + 1, dtype),
        bias,
        ConvOptions::new(case.stride, case.padding, case.dilation, case.groups),
    )
}

#[test]
fn inference_on_flex_matches_burns_conv_and_interpolate() {
    // Plain Flex (no autodiff) runs our forward kernels; Burn's ops are the reference.
    for case in &CASES {
        for (dtype, tol) in [(DType::F64, 1e-13), (DType::F32, 2e-6)] {
            let (x, weight, bias, options) = plain_conv_operands(case, 1, dtype);
            let ours = kernels::conv2d(x.clone(), weight.clone(), bias.clone(), options.clone());
            let burn = burn::tensor::module::conv2d(x, weight, bias, options);
            let err = finite_rel_l2(&tensor_values(ours), &tensor_values(burn));
            assert!(
                err <= tol,
                "conv {dtype:?} input {:?}: rel-L2 {err:e}",
                case.input
            );
        }
    }
    for (input, size) in RESIZES {
        for align_corners in [false, true] {
            let x = fixed_plain(input, 1, DType::F32);
            let ours = kernels::interpolate_bilinear(x.clone(), size, align_corners);
            let options = InterpolateOptions::new(InterpolateMode::Bilinear)
                .with_align_corners(align_corners);
            let burn = burn::tensor::module::interpolate(x, size, options);
            let err = finite_rel_l2(&tensor_values(ours), &tensor_values(burn));
            assert!(err <= 2e-6, "resize {input:?} -> {size:?}: rel-L2 {err:e}");
        }
    }
}

#[test]
fn residual_and_relu_fused_into_the_inference_conv_give_the_separate_ops_bits() {
    // In inference the convolution's output write adds the residual and takes ReLU (where the
    // direct kernel runs); the values must be those of the three ops one after the other.
    for case in &CASES {
        for dtype in [DType::F64, DType::F32] {
            let (x, weight, bias, options) = plain_conv_operands(case, 4, dtype);
            let plain = kernels::conv2d(x.clone(), weight.clone(), bias.clone(), options.clone());
            let residual = fixed_plain(plain.dims(), 7, dtype);
            for relu in [false, true] {
                let after = kernels::AfterConv {
                    residual: Some(residual.clone()),
                    relu,
                };
                let fused = kernels::conv2d_then(
                    x.clone(),
                    weight.clone(),
                    bias.clone(),
                    options.clone(),
                    after,
                );
                let separate = plain.clone() + residual.clone();
                let separate = if relu {
                    burn::tensor::activation::relu(separate)
                } else {
                    separate
                };
                let [fused, separate] = [fused, separate].map(tensor_values);
                let same = fused
                    .iter()
                    .zip(&separate)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same && fused.len() == separate.len(),
                    "{dtype:?} input {:?} relu {relu}: fused and separate ops differ",
                    case.input
                );
                if relu {
                    assert!(fused.contains(&0.0), "ReLU clamped nothing");
                }
            }
        }
    }
}

#[test]
fn pixel_gate_in_inference_matches_burns_ops() {
    // PagFM's gate logit (channel dot product) and blend on plain Flex run our kernels; Burn's
    // broadcasting ops are the reference. The blend has the same bits, the dot product sums
    // in another order than the matrix product with ones.
    for (shape, seed) in [([1, 1, 1, 1], 1), ([2, 3, 7, 5], 2), ([1, 64, 33, 70], 3)] {
        for (dtype, tol) in [(DType::F64, 1e-14), (DType::F32, 1e-6)] {
            let [n, _, h, w] = shape;
            let a = fixed_plain(shape, seed, dtype);
            let b = fixed_plain(shape, seed + 10, dtype);
            let ours = kernels::channel_dot(a.clone(), b.clone());
            let burn = kernels::channel_dot_by_burn(a.clone(), b.clone());
            assert_eq!(ours.dims(), [n, 1, h, w]);
            let err = finite_rel_l2(&tensor_values(ours), &tensor_values(burn));
            assert!(
                err <= tol,
                "channel dot {dtype:?} {shape:?}: rel-L2 {err:e}"
            );

            let s = burn::tensor::activation::sigmoid(fixed_plain([n, 1, h, w], seed + 20, dtype));
            let ours = tensor_values(kernels::gate_blend(a.clone(), b.clone(), s.clone()));
            let burn = tensor_values(kernels::gate_blend_by_burn(a, b, s));
            assert_eq!(ours.len(), burn.len());
            assert!(
                ours.iter()
                    .zip(&burn)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "blend {dtype:?} {shape:?}: not the bits of Burn's ops"
            );
        }
    }
}

/// The gate's `[logit, blend]` outputs and the gradients of `Σ out·r` for the inputs
/// `[a, b, (x = a), (y = b), s]`, by our ops (`own`) or Burn's.
fn pixel_gate_values_and_gradients(
    shape: [usize; 4],
    seed: u64,
    dtype: DType,
    own: bool,
) -> Vec<Vec<f64>> {
    let [n, _, h, w] = shape;
    let a = fixed(shape, seed, dtype).require_grad();
    let b = fixed(shape, seed + 10, dtype).require_grad();
    let s = fixed([n, 1, h, w], seed + 20, dtype).require_grad();
    let (logit, blend) = if own {
        (
            kernels::channel_dot(a.clone(), b.clone()),
            kernels::gate_blend(a.clone(), b.clone(), s.clone()),
        )
    } else {
        (
            kernels::channel_dot_by_burn(a.clone(), b.clone()),
            kernels::gate_blend_by_burn(a.clone(), b.clone(), s.clone()),
        )
    };
    let r_logit = fixed([n, 1, h, w], seed + 30, dtype);
    let r_blend = fixed(shape, seed + 40, dtype);
    let loss = (logit.clone() * r_logit).sum() + (blend.clone() * r_blend).sum();
    let grads = loss.backward();
    let grad = |t: &Tensor<AD, 4>| tensor_values(t.grad(&grads).expect("a gradient"));
    vec![
        tensor_values(logit),
        tensor_values(blend),
        grad(&a),
        grad(&b),
        grad(&s),
    ]
}

#[test]
fn pixel_gate_in_training_matches_burns_ops_values_and_gradients() {
    for (shape, seed) in [([1, 1, 1, 1], 1), ([2, 3, 7, 5], 2), ([2, 32, 17, 40], 3)] {
        for (dtype, tol) in [(DType::F64, 1e-14), (DType::F32, 2e-6)] {
            let ours = pixel_gate_values_and_gradients(shape, seed, dtype, true);
            let burn = pixel_gate_values_and_gradients(shape, seed, dtype, false);
            let names = ["logit", "blend", "d a", "d b", "d s"];
            for ((name, ours), burn) in names.iter().zip(&ours).zip(&burn) {
                assert_eq!(ours.len(), burn.len(), "{name} {shape:?}");
                let err = finite_rel_l2(ours, burn);
                assert!(err <= tol, "{name} {dtype:?} {shape:?}: rel-L2 {err:e}");
            }
        }
    }
}

/// `log_softmax(x, 1)` gathered at `index` by Burn's ops: the reference of `class_log_probs`.
fn class_log_probs_by_burn<B: burn::tensor::backend::Backend>(
    x: Tensor<B, 4>,
    index: Tensor<B, 4, Int>,
) -> Tensor<B, 3> {
    let [n, _, h, w] = x.dims();
    let log_sum_exp = x.clone().exp().sum_dim(1).log();
    (x.gather(1, index) - log_sum_exp).reshape([n, h, w])
}

#[test]
fn class_log_probs_match_burns_ops_values_and_gradients() {
    // One class, an odd image, PIDNet's 19 classes over several blocks of pixels.
    for (shape, seed) in [([2, 1, 3, 5], 1), ([2, 5, 7, 9], 2), ([1, 19, 80, 77], 3)] {
        let [n, c, h, w] = shape;
        let labels: Vec<i64> = (0..n * h * w)
            .map(|i| ((i * 7 + i / 5) % c) as i64)
            .collect();
        let index = || {
            Tensor::<AD, 4, Int>::from_data(
                TensorData::new(labels.clone(), [n, 1, h, w]),
                &Default::default(),
            )
        };
        // f64: the same sums of a few exponentials in another order. f32: each log-probability
        // carries a few roundings of terms of size ≤ 1 in both implementations.
        for (dtype, tol) in [(DType::F64, 1e-13), (DType::F32, 1e-6)] {
            let run = |ours: bool| {
                let x = (fixed(shape, seed, dtype) * 3.0).require_grad();
                let out = if ours {
                    kernels::class_log_probs(x.clone(), index())
                } else {
                    class_log_probs_by_burn(x.clone(), index())
                };
                let r = fixed(out.dims(), seed + 10, dtype);
                let grads = (out.clone() * r).sum().backward();
                let grad = tensor_values(x.grad(&grads).expect("a gradient"));
                [tensor_values(out), grad]
            };
            let (ours, burn) = (run(true), run(false));
            if c == 1 {
                // One class: every log-probability is 0 and so is the gradient (Burn's is
                // rounding noise around 0, which a relative error cannot compare).
                for (what, values) in ["values", "gradient"].iter().zip(&ours) {
                    assert!(values.iter().all(|v| v.abs() <= 1e-6), "one class: {what}");
                }
                continue;
            }
            if c == 19 && dtype == DType::F32 {
                // Equal within rounding but not bit for bit (other exponentials, another
                // order of the sums): equality would mean the dispatch fell through to Burn.
                assert!(ours != burn, "class_log_probs did not use its own kernel");
            }
            for (what, (a, b)) in ["values", "gradient"].iter().zip(ours.iter().zip(&burn)) {
                assert_eq!(a.len(), b.len(), "{what}");
                let err = finite_rel_l2(a, b);
                println!("class_log_probs {shape:?} {dtype:?} {what}: rel-L2 {err:.1e}");
                assert!(
                    err <= tol,
                    "{what} {dtype:?} {shape:?}: rel-L2 {err:e} > {tol:e}"
                );
            }
            // Without autodiff (inference) the values are the same kernel's.
            let x = fixed_plain(shape, seed, dtype) * 3.0;
            let index = index().inner();
            let plain = kernels::class_log_probs(x.clone(), index.clone());
            let err = finite_rel_l2(
                &tensor_values(plain),
                &tensor_values(class_log_probs_by_burn(x, index)),
            );
            assert!(err <= tol, "inference {dtype:?} {shape:?}: rel-L2 {err:e}");
        }
    }
}

#[test]
fn inference_folds_batch_norm_into_the_convolution() {
    // bn(conv(x)) with non-trivial running statistics, folded (plain Flex) against the two
    // layers one after the other.
    use burn::module::{Param, RunningState};
    use segburn_models::nn::{conv_then_batch_norm, pidnet_conv, BatchNorm2dConfig};
    let device = Default::default();
    for (kernel, stride) in [(3, 1), (3, 2), (1, 1)] {
        let mut conv = pidnet_conv::<Flex>(6, 10, kernel, stride, 1, false, &device);
        conv.weight = Param::from_tensor(fixed_plain([10, 6, kernel, kernel], 5, DType::F32));
        let mut bn = BatchNorm2dConfig::new(10).init::<Flex>(&device);
        bn.weight = Param::from_tensor(fixed_plain([10], 6, DType::F32) + 1.5);
        bn.bias = Param::from_tensor(fixed_plain([10], 7, DType::F32));
        bn.running_mean = RunningState::new(fixed_plain([10], 8, DType::F32) * 0.3);
        bn.running_var = RunningState::new(fixed_plain([10], 9, DType::F32) * 0.4 + 0.6);
        let x = fixed_plain([2, 6, 13, 11], 10, DType::F32);
        let folded = conv_then_batch_norm(&conv, &bn, x.clone());
        let separate = bn.forward(segburn_models::nn::conv2d_in_input_dtype(&conv, x));
        let err = finite_rel_l2(&tensor_values(folded), &tensor_values(separate));
        println!("folded batch norm, {kernel}x{kernel} stride {stride}: rel-L2 {err:.1e}");
        assert!(
            err <= 2e-6,
            "{kernel}x{kernel} stride {stride}: rel-L2 {err:e}"
        );
    }
}

/// A training batch norm composed of Burn's ops (batch mean, biased variance).
fn batch_norm_by_burn(
    x: Tensor<AD, 4>,
    weight: Tensor<AD, 1>,
    bias: Tensor<AD, 1>,
    eps: f64,
) -> Tensor<AD, 4> {
    let [n, c, h, w] = x.dims();
    let count = (n * h * w) as f64;
    let per_channel = |t: Tensor<AD, 4>| t.sum_dim(0).sum_dim(2).sum_dim(3) / count;
    let mean = per_channel(x.clone());
    let centered = x - mean;
    let var = per_channel(centered.clone().square());
    let scale = weight.reshape([1, c, 1, 1]) / (var + eps).sqrt();
    centered * scale + bias.reshape([1, c, 1, 1])
}

/// The batch norm's output and its gradients of `Σ y · r` by the textbook formulas, on the host
/// in f64: the reference both implementations are measured against.
fn batch_norm_by_definition(
    [x, w, b, r]: [&[f64]; 4],
    [n, c, h, wd]: [usize; 4],
    eps: f64,
) -> [Vec<f64>; 4] {
    let (plane, count) = (h * wd, (n * h * wd) as f64);
    let mut out = [
        vec![0.0; x.len()],
        vec![0.0; x.len()],
        vec![0.0; c],
        vec![0.0; c],
    ];
    for ch in 0..c {
        let idx: Vec<usize> = (0..n)
            .flat_map(|i| (i * c + ch) * plane..(i * c + ch + 1) * plane)
            .collect();
        let mean = idx.iter().map(|&i| x[i]).sum::<f64>() / count;
        let var = idx.iter().map(|&i| (x[i] - mean).powi(2)).sum::<f64>() / count;
        let inv_std = 1.0 / (var + eps).sqrt();
        let x_hat = |i: usize| (x[i] - mean) * inv_std;
        let sum_r: f64 = idx.iter().map(|&i| r[i]).sum();
        let sum_r_xhat: f64 = idx.iter().map(|&i| r[i] * x_hat(i)).sum();
        for &i in &idx {
            out[0][i] = x_hat(i) * w[ch] + b[ch];
            out[1][i] = w[ch] * inv_std * (r[i] - sum_r / count - x_hat(i) * sum_r_xhat / count);
        }
        out[2][ch] = sum_r_xhat;
        out[3][ch] = sum_r;
    }
    out
}

#[test]
fn training_batch_norm_matches_burns_ops_values_and_gradients() {
    for (shape, seed) in [([2, 3, 5, 7], 1), ([1, 4, 1, 1], 2), ([3, 16, 9, 33], 3)] {
        let c = shape[1];
        let run = |ours: bool, dtype: DType| {
            let x = (fixed(shape, seed, dtype) * 2.0 + 0.5).require_grad();
            let weight = (fixed([c], seed + 1, dtype) + 1.5).require_grad();
            let bias = fixed([c], seed + 2, dtype).require_grad();
            let out = if ours {
                let (out, ..) =
                    kernels::batch_norm_train(x.clone(), weight.clone(), bias.clone(), 1e-5)
                        .expect("training on Flex in f32/f64 runs our batch norm");
                out
            } else {
                batch_norm_by_burn(x.clone(), weight.clone(), bias.clone(), 1e-5)
            };
            let r = fixed(out.dims(), seed + 3, dtype);
            let grads = (out.clone() * r).sum().backward();
            [
                tensor_values(out),
                tensor_values(x.grad(&grads).expect("a gradient")),
                tensor_values(weight.grad(&grads).expect("a gradient")),
                tensor_values(bias.grad(&grads).expect("a gradient")),
            ]
        };
        // Against the f64 textbook formulas: ours in f64 to a few ulp; in f32 within 3× the
        // error of Burn's own f32 composition (the input gradient cancels
        // g − mean(g) − x̂·mean(g·x̂), so f32's error there is well above one rounding).
        // Burn's f64 composition is printed too: it is ~5e-10 off the formulas on the input
        // gradient (its chain of broadcasts and reductions), so it cannot be the f64 reference.
        let inputs = [
            tensor_values(fixed(shape, seed, DType::F64) * 2.0 + 0.5),
            tensor_values(fixed([c], seed + 1, DType::F64) + 1.5),
            tensor_values(fixed([c], seed + 2, DType::F64)),
            tensor_values(fixed(shape, seed + 3, DType::F64)),
        ];
        let reference = batch_norm_by_definition(
            [&inputs[0], &inputs[1], &inputs[2], &inputs[3]],
            shape,
            1e-5,
        );
        let [ours64, burn64, ours32, burn32] = [
            run(true, DType::F64),
            run(false, DType::F64),
            run(true, DType::F32),
            run(false, DType::F32),
        ];
        for (i, what) in ["output", "input grad", "weight grad", "bias grad"]
            .iter()
            .enumerate()
        {
            let error = |values: &[f64]| finite_rel_l2(values, &reference[i]);
            let [err64, burn_err64, err32, burn_err32] =
                [&ours64[i], &burn64[i], &ours32[i], &burn32[i]].map(|v| error(v));
            println!(
                "batch norm {shape:?} {what}: f64 {err64:.1e} (Burn's {burn_err64:.1e}), \
                 f32 {err32:.1e} (Burn's {burn_err32:.1e})"
            );
            assert!(err64 <= 1e-13, "{what} f64 {shape:?}: rel-L2 {err64:e}");
            let bound = 3.0 * burn_err32 + 1e-7;
            assert!(
                err32 <= bound,
                "{what} f32 {shape:?}: rel-L2 {err32:e} > {bound:e}"
            );
        }
    }
    // Without autodiff, or in half precision, the kernel does not run.
    let plain = fixed_plain([1, 2, 3, 3], 1, DType::F32);
    let [w, b] = [
        fixed_plain([2], 2, DType::F32),
        fixed_plain([2], 3, DType::F32),
    ];
    assert!(kernels::batch_norm_train(plain, w, b, 1e-5).is_none());
    let half = fixed([1, 2, 3, 3], 1, DType::BF16);
    let [w, b] = [fixed([2], 2, DType::BF16), fixed([2], 3, DType::BF16)];
    assert!(kernels::batch_norm_train(half, w, b, 1e-5).is_none());
}

//! The convolution kernels against Burn's `conv2d` on `Autodiff<Flex>`: values and all three
//! gradients on odd shapes, strides, padding, dilation and groups, in f64 and f32; the forward
//! kernels without autodiff (inference, with the resize too), and the residual and ReLU fused
//! into the inference convolution.

use burn::backend::Flex;
use burn::tensor::ops::{ConvOptions, InterpolateMode, InterpolateOptions};
use burn::tensor::{DType, Tensor};
use segburn_kernels as kernels;

mod common;
use common::*;

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
        "segburn_kernels::conv2d did not use its own weight gradient"
    );
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
            let err = rel_l2(&tensor_values(ours), &tensor_values(burn));
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
            let err = rel_l2(&tensor_values(ours), &tensor_values(burn));
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

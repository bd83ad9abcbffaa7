//! segburn's CPU kernels against Burn's reference ops on `Autodiff<Flex>`: the convolution
//! through `nn::kernels::conv2d` (our input and weight gradients) and through
//! `burn::tensor::module::conv2d` (Burn's), values and all three gradients, on odd shapes,
//! strides, padding, dilation and groups, in f64 and f32; the bilinear resize through
//! `nn::kernels::interpolate_bilinear` and `burn::tensor::module::interpolate`, values and
//! input gradients, up and down, non-integer ratios, output size 1, both `align_corners`.

use burn::backend::{Autodiff, Flex};
use burn::tensor::ops::{ConvOptions, InterpolateMode, InterpolateOptions};
use burn::tensor::{DType, Tensor, TensorData};
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

//! segburn's CPU kernels against Burn's reference ops on `Autodiff<Flex>`: the convolution
//! through `nn::kernels::conv2d` (our input and weight gradients) and through
//! `burn::tensor::module::conv2d` (Burn's), values and all three gradients, on odd shapes,
//! strides, padding, dilation and groups, in f64 and f32.

use burn::backend::{Autodiff, Flex};
use burn::tensor::ops::ConvOptions;
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

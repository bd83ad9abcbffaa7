//! What the kernel parity tests share: the convolution and resize cases, fixed pseudo-random
//! tensors, and the error measure.

#![allow(dead_code)] // each test file uses a part

use burn::backend::{Autodiff, Flex};
use burn::tensor::{DType, Tensor, TensorData};
pub use segburn_kernels::accuracy::{rel_l2, tensor_values, test_values};

pub type AD = Autodiff<Flex>;

pub struct Case {
    pub input: [usize; 4],
    pub out_channels: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
    pub bias: bool,
}

pub const CASES: [Case; 7] = [
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
    // A 1×1 with padding and an uneven stride: rows of the input get no gradient.
    Case {
        input: [1, 4, 6, 6],
        out_channels: 4,
        kernel: [1, 1],
        stride: [2, 1],
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

/// Bilinear resizes: input `[N, C, H, W]` and output size.
pub const RESIZES: [([usize; 4], [usize; 2]); 8] = [
    ([2, 3, 7, 9], [19, 23]),   // upsampling, non-integer ratios
    ([1, 2, 8, 16], [64, 128]), // PIDNet's 1/8 -> full resolution
    ([2, 3, 17, 13], [5, 4]),   // downsampling, non-integer ratios
    ([1, 3, 6, 5], [1, 1]),     // output size 1
    ([1, 2, 1, 7], [4, 3]),     // input size 1 along one axis, down along the other
    ([2, 4, 9, 6], [9, 6]),     // same size
    ([1, 2, 5, 8], [12, 3]),    // up along one axis, down along the other
    ([2, 5, 32, 32], [64, 64]), // PIDNet's 1/16 -> 1/8
];

/// A tensor of fixed pseudo-random values in [-1, 1) (not Burn's global RNG, which tests running
/// in parallel would share).
pub fn fixed<const D: usize>(shape: [usize; D], seed: u64, dtype: DType) -> Tensor<AD, D> {
    let values = test_values(shape.iter().product(), seed);
    Tensor::<AD, D>::from_data(TensorData::new(values, shape), &Default::default()).cast(dtype)
}

/// A plain-Flex (inference) tensor with the values of [`fixed`].
pub fn fixed_plain<const D: usize>(shape: [usize; D], seed: u64, dtype: DType) -> Tensor<Flex, D> {
    fixed(shape, seed, dtype).inner()
}

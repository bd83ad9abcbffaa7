//! A strided 1×1 convolution as a subsampling and a 1×1 convolution with stride 1, for training
//! on the GPU backends.
//!
//! Why: burn-cubecl 0.21 (wgpu, and the same generic code on CUDA) returns an input gradient of
//! zeros for a 1×1 kernel with a stride above 1 (measured on wgpu-lavapipe: `[1, 4, 8, 8]`
//! input, `[4, 4, 1, 1]` weight, stride 2: ‖dx‖ 0 against 4.76 on Flex; 3×3, 2×2 and 7×7
//! kernels at strides 2–4 are right). PIDNet's downsampling shortcuts are such convolutions,
//! so the layers before them would train on a wrong gradient without a word. Taking every
//! `s`-th row and column first (`select`, whose gradient is a scatter-add on every backend)
//! computes the same values with a stride-1 product, whose gradient is right.

use burn::tensor::backend::Backend;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Int, Tensor, TensorData};

/// Whether `conv2d(x, weight, options)` is a strided 1×1 convolution.
pub(crate) fn is_strided_pointwise(weight_dims: [usize; 4], options: &ConvOptions<2>) -> bool {
    weight_dims[2..] == [1, 1] && options.stride != [1, 1]
}

/// `conv2d(x, weight, bias, options)` for a 1×1 `weight`: the rows and columns the stride
/// lands on (after the zero padding), then the convolution with stride 1 and no padding.
pub(crate) fn strided_pointwise_conv2d<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    let [pad_h, pad_w] = options.padding;
    let x = if pad_h + pad_w > 0 {
        x.pad(
            [(pad_h, pad_h), (pad_w, pad_w)],
            burn::tensor::ops::PadMode::Constant(0.0),
        )
    } else {
        x
    };
    let [_, _, h, w] = x.dims();
    let device = x.device();
    let every = |size: usize, stride: usize| -> Tensor<B, 1, Int> {
        let picked: Vec<i64> = (0..size).step_by(stride).map(|i| i as i64).collect();
        let count = picked.len();
        Tensor::from_data(TensorData::new(picked, [count]), &device)
    };
    let [stride_h, stride_w] = options.stride;
    let x = x
        .select(2, every(h, stride_h))
        .select(3, every(w, stride_w));
    let unit = ConvOptions::new([1, 1], [0, 0], [1, 1], options.groups);
    burn::tensor::module::conv2d(x, weight, bias, unit)
}

//! The convolution family: a 2-D convolution as im2col / col2im and matrix products (forward,
//! weight gradient, input gradient; `unfold.rs`, `col2im.rs`), a direct forward kernel for
//! CPU inference on AVX-512 (`direct.rs`, `direct_tiles.rs`), and the transposed convolution
//! whose kernel equals its stride as a matrix product and a block-to-space copy.
//!
//! Why our own: Burn 0.21's weight gradient on Flex is a convolution over the batch that adds
//! the output positions one after the other: 4–5× less accurate in f32 than PyTorch's on
//! PIDNet-S's boundary head, and 2–7× slower. On PIDNet-S's six measured layers, against
//! Flex's: forward 2.6× faster, input gradient 2.3×, weight gradient 8.1×. The forward's tiles
//! sum every output exactly as one product over the whole image does (as PyTorch's GEMM path
//! sums), which the training gradients' accuracy depends on.

mod autodiff;
mod col2im;
mod direct;
mod direct_tiles;
mod flex;
mod geometry;
mod pointwise_strided;
mod shared_rows;
#[cfg(test)]
mod tests;
mod unfold;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor};
use burn::tensor::Tensor;

pub use col2im::conv2d_input_grad;
pub use direct::{conv2d_forward_direct, direct_conv_applies, direct_conv_is_fast_here, Epilogue};
pub use geometry::ConvGeometry;
pub use unfold::{conv2d_forward, conv2d_weight_grad};

use crate::dispatch::{flex_primitive, from_flex, is_flex, route, same_backend, Route};
use crate::layout::blocks_to_space_tracked;
use pointwise_strided::{is_strided_pointwise, strided_pointwise_conv2d};

/// The convolution kernels of a backend.
pub trait ConvKernels: Backend {
    /// `conv2d(x, weight) + bias`.
    fn conv2d_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `dL/dx` of `conv2d(x, weight)` from the output's gradient.
    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `dL/dweight` of `conv2d(x, weight)` from the output's gradient.
    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;
}

/// `conv2d(x, weight) + bias`, by our kernels on the CPU in f32/f64 (in training with our
/// gradients), by Burn's op everywhere else.
pub fn conv2d<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    conv2d_then(x, weight, bias, options, AfterConv::nothing())
}

/// What follows a convolution in a residual block: a residual added (same shape as the
/// output), then ReLU. In CPU inference the convolution's output write does both (no extra
/// passes over the output, the same values); elsewhere they run as Burn's ops.
#[derive(Debug, Clone)]
pub struct AfterConv<B: Backend> {
    /// Added to the convolution's output.
    pub residual: Option<Tensor<B, 4>>,
    /// Whether ReLU follows (after the residual).
    pub relu: bool,
}

impl<B: Backend> AfterConv<B> {
    /// The convolution's output as it is.
    pub fn nothing() -> Self {
        Self {
            residual: None,
            relu: false,
        }
    }

    /// ReLU of the output.
    pub fn relu() -> Self {
        Self {
            residual: None,
            relu: true,
        }
    }

    /// The same by Burn's ops, on an output computed elsewhere.
    pub fn apply(self, out: Tensor<B, 4>) -> Tensor<B, 4> {
        let out = match self.residual {
            Some(residual) => out + residual,
            None => out,
        };
        if self.relu {
            burn::tensor::activation::relu(out)
        } else {
            out
        }
    }
}

/// `after(conv2d(x, weight) + bias)`: [`conv2d`] followed by [`AfterConv`].
pub fn conv2d_then<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
    after: AfterConv<B>,
) -> Tensor<B, 4> {
    match route::<B>(x.dtype()) {
        Route::Burn
            if !is_flex::<B>()
                && B::ad_enabled(&x.device())
                && is_strided_pointwise(weight.dims(), &options) =>
        {
            after.apply(strided_pointwise_conv2d(x, weight, bias, options))
        }
        Route::Burn => after.apply(burn::tensor::module::conv2d(x, weight, bias, options)),
        Route::OwnInference => {
            // The bias is written into the output before the product adds to it: no extra pass.
            let out = flex::conv2d_inference(
                flex_primitive(x),
                flex_primitive(weight),
                bias.map(flex_primitive),
                options,
                after.residual.map(flex_primitive),
                after.relu,
            );
            from_flex(out)
        }
        Route::OwnTraining => {
            let out: Tensor<B, 4> = same_backend(autodiff::conv2d_tracked::<Flex>(
                same_backend(x),
                same_backend(weight),
                options,
            ));
            let out = match bias {
                Some(bias) => add_channel_bias(out, bias),
                None => out,
            };
            after.apply(out)
        }
    }
}

/// PyTorch's `conv_transpose2d(x, weight, bias)` (`weight` `[C_in, C_out, kh, kw]`). Where the
/// kernel equals the stride (no padding, dilation or groups; SAM2's 2×2 upscaling), in CPU
/// training in f32/f64, as one matrix product per image, `Wᵀ X`, and a block-to-space copy
/// (with our gradient for the copy, Burn's for the product); everywhere else by Burn's op.
pub fn conv_transpose2d<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvTransposeOptions<2>,
) -> Tensor<B, 4> {
    let [batch, in_channels, h, w] = x.dims();
    let [_, out_channels, kh, kw] = weight.dims();
    let k = kh;
    let blocks_only = kh == kw
        && options.stride == [k, k]
        && options.padding == [0, 0]
        && options.padding_out == [0, 0]
        && options.dilation == [1, 1]
        && options.groups == 1;
    // Training only: in inference Flex's own transposed convolution is as fast (the SAM2
    // decoder forward measured 1–2 ms faster with it); its gradients are what is slow.
    if !blocks_only || route::<B>(x.dtype()) != Route::OwnTraining {
        return burn::tensor::module::conv_transpose2d(x, weight, bias, options);
    }
    // [1, C_out·k·k, C_in] × [N, C_in, H·W]: the weight as a transposed view, which Flex's
    // matmul reads in place.
    let weight = weight
        .reshape([in_channels, out_channels * k * k])
        .transpose()
        .unsqueeze::<3>();
    let products = weight
        .matmul(x.reshape([batch, in_channels, h * w]))
        .reshape([batch, out_channels * k * k, h, w]);
    let out: Tensor<B, 4> =
        same_backend(blocks_to_space_tracked::<Flex>(same_backend(products), k));
    match bias {
        Some(bias) => add_channel_bias(out, bias),
        None => out,
    }
}

/// `x + bias` per channel of `[N, C, H, W]`, by Burn's ops (which give the gradient): as
/// `[N·C, H·W]` rows plus an `[N·C, 1]` column, the broadcast Flex runs fast both ways (a
/// `[1, C, 1, 1]` operand goes element by element through strided indices for `N > 1`).
fn add_channel_bias<B: Backend>(x: Tensor<B, 4>, bias: Tensor<B, 1>) -> Tensor<B, 4> {
    let dims = x.dims();
    let [n, c, h, w] = dims;
    let column = bias.reshape([1, c]).expand([n, c]).reshape([n * c, 1]);
    (x.reshape([n * c, h * w]) + column).reshape(dims)
}

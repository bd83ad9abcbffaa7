//! Convolutions that run in the input's dtype, and the two conv+norm pairs PIDNet is built from.

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig, ConvTranspose2d};
use burn::nn::{Initializer, PaddingConfig2d};
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use burn::tensor::{backend::Backend, Tensor};

use super::{BatchNorm2d, BatchNorm2dConfig};
use segburn_kernels::{self as kernels, conv2d, conv2d_then, AfterConv};

/// Applies `conv` (padding `k / 2`) in the dtype of `input` (casting the f32 master weights), so that a half
/// precision input gives a half precision convolution.
pub fn conv2d_in_input_dtype<B: Backend>(conv: &Conv2d<B>, input: Tensor<B, 4>) -> Tensor<B, 4> {
    let dtype = input.dtype();
    let weight = conv.weight.val().cast(dtype);
    let bias = conv.bias.as_ref().map(|b| b.val().cast(dtype));
    let [_, _, kh, kw] = weight.dims();
    // Every convolution in our models pads symmetrically by k / 2 (PyTorch `padding=k//2`).
    let padding = [kh / 2, kw / 2];
    let options = ConvOptions::new(conv.stride, padding, conv.dilation, conv.groups);
    conv2d(input, weight, bias, options)
}

/// Applies `conv` with its own padding (valid, or symmetric explicit padding) in the dtype of
/// `input`, as [`conv2d_in_input_dtype`]; for layers whose padding is not `k / 2` (SAM 2's
/// strided mask downsamplers).
///
/// # Panics
/// On asymmetric explicit padding, which no model here builds.
pub fn conv2d_as_configured<B: Backend>(conv: &Conv2d<B>, input: Tensor<B, 4>) -> Tensor<B, 4> {
    let dtype = input.dtype();
    let weight = conv.weight.val().cast(dtype);
    let bias = conv.bias.as_ref().map(|b| b.val().cast(dtype));
    let [_, _, kh, kw] = weight.dims();
    let padding = match conv.padding {
        PaddingConfig2d::Valid => [0, 0],
        PaddingConfig2d::Same => [kh / 2, kw / 2],
        PaddingConfig2d::Explicit(top, left, bottom, right) => {
            assert!(
                top == bottom && left == right,
                "asymmetric padding {:?}",
                conv.padding
            );
            [top, left]
        }
    };
    let options = ConvOptions::new(conv.stride, padding, conv.dilation, conv.groups);
    conv2d(input, weight, bias, options)
}

/// `bn(conv(input))`, the convolution in the dtype of `input` as [`conv2d_in_input_dtype`].
///
/// In inference the normalisation is folded into the convolution: the weights scaled per output
/// channel, the shift as the bias. That saves a full pass over the output (and on the CPU the
/// bias costs nothing: the convolution kernel starts from it). In training the batch
/// statistics need the convolution's output, so the two run one after the other.
pub fn conv_then_batch_norm<B: Backend>(
    conv: &Conv2d<B>,
    bn: &BatchNorm2d<B>,
    input: Tensor<B, 4>,
) -> Tensor<B, 4> {
    conv_then_batch_norm_then(conv, bn, input, AfterConv::nothing())
}

/// `after(bn(conv(input)))`: [`conv_then_batch_norm`], then a residual added and ReLU where
/// `after` asks (in CPU inference in the convolution's output write).
pub fn conv_then_batch_norm_then<B: Backend>(
    conv: &Conv2d<B>,
    bn: &BatchNorm2d<B>,
    input: Tensor<B, 4>,
    after: AfterConv<B>,
) -> Tensor<B, 4> {
    let device = input.device();
    if B::ad_enabled(&device) {
        return after.apply(bn.forward(conv2d_in_input_dtype(conv, input)));
    }
    let dtype = input.dtype();
    // Scaled in the statistics' precision (f32 for half-precision inputs), then cast.
    let stats_dtype = conv.weight.val().dtype();
    let (scale, shift) = bn.inference_affine(stats_dtype, &device);
    // As `[O, K]` rows times an `[O, 1]` column: Flex broadcasts that fast, a `[O, 1, 1, 1]`
    // factor over a 4-D weight element by element.
    let weight = conv.weight.val();
    let dims = weight.dims();
    let [out_channels, patch] = [dims[0], dims[1] * dims[2] * dims[3]];
    let weight = (weight.reshape([out_channels, patch]) * scale.clone().reshape([out_channels, 1]))
        .reshape(dims);
    let bias = match &conv.bias {
        Some(bias) => bias.val().cast(stats_dtype) * scale + shift,
        None => shift,
    };
    let [_, _, kh, kw] = weight.dims();
    let options = ConvOptions::new(conv.stride, [kh / 2, kw / 2], conv.dilation, conv.groups);
    conv2d_then(
        input,
        weight.cast(dtype),
        Some(bias.cast(dtype)),
        options,
        after,
    )
}

/// Applies `conv` in the dtype of `input`, like [`conv2d_in_input_dtype`].
pub fn conv_transpose2d_in_input_dtype<B: Backend>(
    conv: &ConvTranspose2d<B>,
    input: Tensor<B, 4>,
) -> Tensor<B, 4> {
    let dtype = input.dtype();
    let options = ConvTransposeOptions::new(
        conv.stride,
        conv.padding,
        conv.padding_out,
        conv.dilation,
        conv.groups,
    );
    kernels::conv_transpose2d(
        input,
        conv.weight.val().cast(dtype),
        conv.bias.as_ref().map(|b| b.val().cast(dtype)),
        options,
    )
}

/// A PIDNet convolution: PyTorch's Kaiming-normal (fan_out, ReLU) initialisation, padding
/// `k / 2`, and a bias only where the official model has one.
pub fn pidnet_conv<B: Backend>(
    in_channels: usize,
    out_channels: usize,
    kernel: usize,
    stride: usize,
    groups: usize,
    bias: bool,
    device: &B::Device,
) -> Conv2d<B> {
    Conv2dConfig::new([in_channels, out_channels], [kernel, kernel])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(
            kernel / 2,
            kernel / 2,
            kernel / 2,
            kernel / 2,
        ))
        .with_groups(groups)
        .with_bias(bias)
        .with_initializer(Initializer::KaimingNormal {
            gain: std::f64::consts::SQRT_2,
            fan_out_only: true,
        })
        .init(device)
}

/// Configuration of [`ConvBn`].
#[derive(Config, Debug)]
pub struct ConvBnConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: usize,
    #[config(default = 1)]
    pub stride: usize,
}

impl ConvBnConfig {
    pub fn init<B: Backend>(&self, device: &B::Device) -> ConvBn<B> {
        ConvBn {
            conv: pidnet_conv(
                self.in_channels,
                self.out_channels,
                self.kernel,
                self.stride,
                1,
                false,
                device,
            ),
            bn: BatchNorm2dConfig::new(self.out_channels).init(device),
        }
    }
}

/// `Sequential(Conv2d(bias=False), BatchNorm2d)`: keys `X.0.weight`, `X.1.*`.
#[derive(Module, Debug)]
pub struct ConvBn<B: Backend> {
    pub conv: Conv2d<B>,
    pub bn: BatchNorm2d<B>,
}

impl<B: Backend> ConvBn<B> {
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        conv_then_batch_norm(&self.conv, &self.bn, x)
    }
}

/// Configuration of [`PreActConv`].
#[derive(Config, Debug)]
pub struct PreActConvConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: usize,
    #[config(default = 1)]
    pub groups: usize,
}

impl PreActConvConfig {
    pub fn init<B: Backend>(&self, device: &B::Device) -> PreActConv<B> {
        PreActConv {
            bn: BatchNorm2dConfig::new(self.in_channels).init(device),
            conv: pidnet_conv(
                self.in_channels,
                self.out_channels,
                self.kernel,
                1,
                self.groups,
                false,
                device,
            ),
        }
    }
}

/// Pre-activation `Sequential(BatchNorm2d, ReLU, Conv2d(bias=False))`: keys `X.0.*`, `X.2.weight`
/// (or `X.1.*`, `X.3.weight` when a pooling layer comes first; the model's key rule knows which).
#[derive(Module, Debug)]
pub struct PreActConv<B: Backend> {
    pub bn: BatchNorm2d<B>,
    pub conv: Conv2d<B>,
}

impl<B: Backend> PreActConv<B> {
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = burn::tensor::activation::relu(self.bn.forward(x));
        conv2d_in_input_dtype(&self.conv, x)
    }
}

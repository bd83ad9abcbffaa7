//! The stem: two stride-2 3×3 convolutions (with bias, unlike the rest of the net), each followed
//! by BN and ReLU. Official keys `conv1.0`, `conv1.1`, `conv1.3`, `conv1.4`.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::Initializer;
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::{conv_then_batch_norm_then, pidnet_conv, BatchNorm2d, BatchNorm2dConfig};
use segburn_kernels::AfterConv;

#[derive(Module, Debug)]
pub struct Stem<B: Backend> {
    pub conv1: Conv2d<B>,
    pub bn1: BatchNorm2d<B>,
    pub conv2: Conv2d<B>,
    pub bn2: BatchNorm2d<B>,
}

/// A conv with PyTorch's default bias init, U(−1/√fan_in, 1/√fan_in).
pub fn conv_with_torch_bias<B: Backend>(
    in_channels: usize,
    out_channels: usize,
    kernel: usize,
    stride: usize,
    device: &B::Device,
) -> Conv2d<B> {
    let mut conv = pidnet_conv(in_channels, out_channels, kernel, stride, 1, true, device);
    let bound = 1.0 / ((in_channels * kernel * kernel) as f64).sqrt();
    conv.bias = Some(
        Initializer::Uniform {
            min: -bound,
            max: bound,
        }
        .init([out_channels], device),
    );
    conv
}

impl<B: Backend> Stem<B> {
    pub fn new(planes: usize, device: &B::Device) -> Self {
        Self {
            conv1: conv_with_torch_bias(3, planes, 3, 2, device),
            bn1: BatchNorm2dConfig::new(planes).init(device),
            conv2: conv_with_torch_bias(planes, planes, 3, 2, device),
            bn2: BatchNorm2dConfig::new(planes).init(device),
        }
    }

    /// `[N, 3, H, W] -> [N, planes, H/4, W/4]`
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = conv_then_batch_norm_then(&self.conv1, &self.bn1, x, AfterConv::relu());
        conv_then_batch_norm_then(&self.conv2, &self.bn2, x, AfterConv::relu())
    }
}

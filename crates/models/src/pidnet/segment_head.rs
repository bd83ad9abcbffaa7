//! The pre-activation segmentation head: `BN → ReLU → conv3x3 → BN → ReLU → conv1x1(+bias)`.
//! PIDNet never uses its `scale_factor`, so the head does not upsample.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::tensor::activation::relu;
use burn::tensor::{backend::Backend, Tensor};

use super::stem::conv_with_torch_bias;
use crate::nn::{conv2d_in_input_dtype, pidnet_conv, BatchNorm2d, BatchNorm2dConfig};

#[derive(Module, Debug)]
pub struct SegmentHead<B: Backend> {
    pub bn1: BatchNorm2d<B>,
    pub conv1: Conv2d<B>,
    pub bn2: BatchNorm2d<B>,
    pub conv2: Conv2d<B>,
}

impl<B: Backend> SegmentHead<B> {
    pub fn new(inplanes: usize, interplanes: usize, outplanes: usize, device: &B::Device) -> Self {
        Self {
            bn1: BatchNorm2dConfig::new(inplanes).init(device),
            conv1: pidnet_conv(inplanes, interplanes, 3, 1, 1, false, device),
            bn2: BatchNorm2dConfig::new(interplanes).init(device),
            conv2: conv_with_torch_bias(interplanes, outplanes, 1, 1, device),
        }
    }

    /// `[N, inplanes, h, w] -> [N, outplanes, h, w]`
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = conv2d_in_input_dtype(&self.conv1, relu(self.bn1.forward(x)));
        conv2d_in_input_dtype(&self.conv2, relu(self.bn2.forward(x)))
    }
}

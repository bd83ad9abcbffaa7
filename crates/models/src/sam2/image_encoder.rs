//! A light convolutional image encoder, so the SAM2-style model can train end to end here.
//!
//! It is *not* SAM2's Hiera trunk + FPN neck (which official checkpoints carry under
//! `image_encoder.*`; those keys are reported as not loaded). It produces what the heads need:
//! three 256-channel levels at strides 4, 8 and 16, like SAM2's neck output `backbone_fpn`.
//! The decoder's `conv_s0`/`conv_s1` then project strides 4 and 8 to 32 and 64 channels.
//!
//! Layout: a stem of two stride-2 3×3 convolutions reaches stride 4, then two stages of
//! (stride-2 3×3 conv, 3×3 conv) reach strides 8 and 16; each conv is followed by LayerNorm2d and
//! GELU (batch-size independent, unlike BatchNorm, which matters with one image per step).
//! A 1×1 lateral convolution per level maps to `d_model` channels.

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Gelu, PaddingConfig2d};
use burn::tensor::{backend::Backend, Tensor};

use super::layer_norm2d::{LayerNorm2d, LayerNorm2dConfig};
use crate::nn::conv2d_in_input_dtype;
use segburn_kernels as kernels;

/// Configuration of an [`ImageEncoder`].
#[derive(Config, Debug)]
pub struct ImageEncoderConfig {
    /// Channels at strides 4, 8 and 16.
    #[config(default = "[64, 128, 256]")]
    pub channels: [usize; 3],
    /// Channels of every output level (the decoder's transformer width).
    #[config(default = 256)]
    pub d_model: usize,
}

/// Conv → LayerNorm2d → GELU.
#[derive(Module, Debug)]
pub struct ConvNormAct<B: Backend> {
    /// The convolution.
    pub conv: Conv2d<B>,
    /// The channel norm.
    pub norm: LayerNorm2d<B>,
    act: Gelu,
}

impl<B: Backend> ConvNormAct<B> {
    fn new(channels: [usize; 2], stride: usize, device: &B::Device) -> Self {
        Self {
            conv: Conv2dConfig::new(channels, [3, 3])
                .with_stride([stride, stride])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            norm: LayerNorm2dConfig::new(channels[1]).init(device),
            act: Gelu::new(),
        }
    }

    /// `[N, C_in, H, W] -> [N, C_out, H/stride, W/stride]`
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        // `kernels::gelu`: PyTorch's CPU erf, and our gradient (`act` stays for the record).
        kernels::gelu(self.norm.forward(conv2d_in_input_dtype(&self.conv, x)))
    }
}

/// The encoder's outputs: 256-channel features at strides 4, 8 and 16.
#[derive(Debug, Clone)]
pub struct BackboneFeatures<B: Backend> {
    /// `[N, d_model, H/4, W/4]` (SAM2's FPN level 0, projected by `conv_s0`).
    pub stride4: Tensor<B, 4>,
    /// `[N, d_model, H/8, W/8]` (level 1, projected by `conv_s1`).
    pub stride8: Tensor<B, 4>,
    /// `[N, d_model, H/16, W/16]`: the image embedding.
    pub stride16: Tensor<B, 4>,
}

/// The light CNN encoder.
#[derive(Module, Debug)]
pub struct ImageEncoder<B: Backend> {
    /// Two stride-2 convolutions: stride 4.
    pub stem: Vec<ConvNormAct<B>>,
    /// Stride 8 and stride 16 stages, two convolutions each.
    pub stages: Vec<Vec<ConvNormAct<B>>>,
    /// 1×1 projections of the three levels to `d_model` channels.
    pub lateral: Vec<Conv2d<B>>,
}

impl ImageEncoderConfig {
    /// Builds the encoder.
    pub fn init<B: Backend>(&self, device: &B::Device) -> ImageEncoder<B> {
        let [c4, c8, c16] = self.channels;
        let stem = vec![
            ConvNormAct::new([3, c4 / 2], 2, device),
            ConvNormAct::new([c4 / 2, c4], 2, device),
        ];
        let stage = |from: usize, to: usize| {
            vec![
                ConvNormAct::new([from, to], 2, device),
                ConvNormAct::new([to, to], 1, device),
            ]
        };
        ImageEncoder {
            stem,
            stages: vec![stage(c4, c8), stage(c8, c16)],
            lateral: self
                .channels
                .iter()
                .map(|&c| Conv2dConfig::new([c, self.d_model], [1, 1]).init(device))
                .collect(),
        }
    }
}

impl<B: Backend> ImageEncoder<B> {
    /// `[N, 3, H, W]` (normalised RGB, H and W multiples of 16) -> strides 4, 8, 16.
    pub fn forward(&self, images: Tensor<B, 4>) -> BackboneFeatures<B> {
        let run = |layers: &[ConvNormAct<B>], x: Tensor<B, 4>| {
            layers.iter().fold(x, |x, layer| layer.forward(x))
        };
        let x4 = run(&self.stem, images);
        let x8 = run(&self.stages[0], x4.clone());
        let x16 = run(&self.stages[1], x8.clone());
        BackboneFeatures {
            stride4: conv2d_in_input_dtype(&self.lateral[0], x4),
            stride8: conv2d_in_input_dtype(&self.lateral[1], x8),
            stride16: conv2d_in_input_dtype(&self.lateral[2], x16),
        }
    }
}

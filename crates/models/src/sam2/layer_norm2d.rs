//! Layer normalisation with the official parameter names (`weight`, `bias`).
//!
//! Burn's `nn::LayerNorm` names its parameters `gamma`/`beta`; these keep PyTorch's names so
//! checkpoint keys map one-to-one. Two variants exist in SAM2 and they differ in more than the
//! axis: `nn.LayerNorm` in the transformer uses eps 1e-5, `LayerNorm2d` in the convolutional
//! parts uses eps 1e-6.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Tensor, TensorPrimitive};

/// Configuration of a [`LayerNorm`] over the last dimension.
#[derive(Config, Debug)]
pub struct LayerNormConfig {
    /// Size of the normalised (last) dimension.
    pub d_model: usize,
    /// `torch.nn.LayerNorm`'s default.
    #[config(default = 1e-5)]
    pub epsilon: f64,
}

/// `torch.nn.LayerNorm(d_model)`: normalises the last dimension with the biased variance.
#[derive(Module, Debug)]
pub struct LayerNorm<B: Backend> {
    /// `[d_model]`, initialised to 1.
    pub weight: Param<Tensor<B, 1>>,
    /// `[d_model]`, initialised to 0.
    pub bias: Param<Tensor<B, 1>>,
    epsilon: f64,
}

impl LayerNormConfig {
    /// Builds the norm with weight 1 and bias 0.
    pub fn init<B: Backend>(&self, device: &B::Device) -> LayerNorm<B> {
        LayerNorm {
            weight: Param::from_tensor(Tensor::ones([self.d_model], device)),
            bias: Param::from_tensor(Tensor::zeros([self.d_model], device)),
            epsilon: self.epsilon,
        }
    }
}

impl<B: Backend> LayerNorm<B> {
    /// `[..., d_model] -> [..., d_model]`
    pub fn forward<const D: usize>(&self, input: Tensor<B, D>) -> Tensor<B, D> {
        // The backend's fused kernel (two-pass, biased variance) matches torch's layer_norm.
        Tensor::from_primitive(TensorPrimitive::Float(B::layer_norm(
            input.into_primitive().tensor(),
            self.weight.val().into_primitive().tensor(),
            Some(self.bias.val().into_primitive().tensor()),
            self.epsilon,
        )))
    }
}

/// Configuration of a [`LayerNorm2d`].
#[derive(Config, Debug)]
pub struct LayerNorm2dConfig {
    /// Number of channels.
    pub num_channels: usize,
    /// SAM2's `LayerNorm2d` default (not torch's 1e-5).
    #[config(default = 1e-6)]
    pub epsilon: f64,
}

/// SAM2's `LayerNorm2d`: normalises over the channels of an NCHW tensor, per pixel.
#[derive(Module, Debug)]
pub struct LayerNorm2d<B: Backend> {
    /// `[C]`, initialised to 1.
    pub weight: Param<Tensor<B, 1>>,
    /// `[C]`, initialised to 0.
    pub bias: Param<Tensor<B, 1>>,
    epsilon: f64,
}

impl LayerNorm2dConfig {
    /// Builds the norm with weight 1 and bias 0.
    pub fn init<B: Backend>(&self, device: &B::Device) -> LayerNorm2d<B> {
        LayerNorm2d {
            weight: Param::from_tensor(Tensor::ones([self.num_channels], device)),
            bias: Param::from_tensor(Tensor::zeros([self.num_channels], device)),
            epsilon: self.epsilon,
        }
    }
}

impl<B: Backend> LayerNorm2d<B> {
    /// `[N, C, H, W] -> [N, C, H, W]`
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let [channels] = self.weight.shape().dims();
        let centered = input.clone() - input.mean_dim(1);
        let variance = centered.clone().square().mean_dim(1);
        let normalised = centered / (variance + self.epsilon).sqrt();
        let weight = self.weight.val().reshape([1, channels, 1, 1]);
        let bias = self.bias.val().reshape([1, channels, 1, 1]);
        normalised * weight + bias
    }
}

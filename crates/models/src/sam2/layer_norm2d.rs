//! Layer normalisation with the official parameter names (`weight`, `bias`).
//!
//! Burn's `nn::LayerNorm` names its parameters `gamma`/`beta`; these keep PyTorch's names so
//! checkpoint keys map one-to-one. Two variants exist in SAM2 and they differ in more than the
//! axis: `nn.LayerNorm` in the transformer uses eps 1e-5, `LayerNorm2d` in the convolutional
//! parts uses eps 1e-6.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, DType, FloatDType, Tensor};

use segburn_kernels as kernels;

/// Norm statistics run in at least f32: half-precision inputs are promoted, f64 stays f64.
pub(crate) fn statistics_dtype(dtype: DType) -> FloatDType {
    if dtype == DType::F64 {
        FloatDType::F64
    } else {
        FloatDType::F32
    }
}

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
    /// `[..., d_model] -> [..., d_model]`. The statistics are computed in at least f32 whatever
    /// the input's dtype (as under PyTorch's autocast); the result has the input's dtype.
    pub fn forward<const D: usize>(&self, input: Tensor<B, D>) -> Tensor<B, D> {
        let dtype = input.dtype();
        let compute = statistics_dtype(dtype);
        let input = input.cast(compute);
        let (weight, bias) = (self.weight.val(), self.bias.val());
        match kernels::layer_norm(input.clone(), weight, bias, D - 1, self.epsilon) {
            Some(y) => y.cast(dtype),
            None => self.composed(input, compute).cast(dtype),
        }
    }

    /// [`LayerNorm::forward`] by Burn's ops (CUDA, and the reference of the CPU kernel), on an
    /// input already in the `compute` dtype.
    pub(crate) fn composed<const D: usize>(
        &self,
        input: Tensor<B, D>,
        compute: FloatDType,
    ) -> Tensor<B, D> {
        let shape = input.dims();
        let d_model = shape[D - 1];
        let rows = shape[..D - 1].iter().product();
        // Written out on a 2-D view rather than the backend's fused kernel: the same ops then
        // run forward and backward, and Flex broadcasts rank-2 operands far faster than
        // rank-3 ones (the autodiff fallback of the fused op works at the input's rank).
        let x = input.reshape([rows, d_model]);
        let centered = x.clone() - x.mean_dim(1);
        let variance = centered.clone().square().mean_dim(1);
        let normalised = centered / (variance + self.epsilon).sqrt();
        let y = normalised * self.weight.val().cast(compute).unsqueeze()
            + self.bias.val().cast(compute).unsqueeze();
        y.reshape(shape)
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
    /// `[N, C, H, W] -> [N, C, H, W]`, with f32 statistics and the input's dtype (see
    /// [`LayerNorm::forward`]).
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let dtype = input.dtype();
        let compute = statistics_dtype(dtype);
        let input = input.cast(compute);
        let (weight, bias) = (self.weight.val(), self.bias.val());
        match kernels::layer_norm(input.clone(), weight, bias, 1, self.epsilon) {
            Some(y) => y.cast(dtype),
            None => self.composed(input, compute).cast(dtype),
        }
    }

    /// [`LayerNorm2d::forward`] by Burn's ops, on an input already in the `compute` dtype.
    pub(crate) fn composed(&self, input: Tensor<B, 4>, compute: FloatDType) -> Tensor<B, 4> {
        let [n, c, h, w] = input.dims();
        // Per-channel statistics are materialised to the full shape before use: Flex's
        // broadcasting of rank-4 operands is ~30× slower than same-shape element-wise ops.
        let full = |t: Tensor<B, 4>, dim: usize, times: usize| t.repeat_dim(dim, times);
        let mean = full(input.clone().mean_dim(1), 1, c);
        let centered = input - mean;
        let variance = full(centered.clone().square().mean_dim(1), 1, c);
        let normalised = centered / (variance + self.epsilon).sqrt();
        let per_channel = |p: Tensor<B, 1>| {
            let t = p.cast(compute).reshape([1, c, 1, 1]);
            full(full(full(t, 0, n), 2, h), 3, w)
        };
        normalised * per_channel(self.weight.val()) + per_channel(self.bias.val())
    }
}

#[cfg(test)]
#[path = "layer_norm2d_tests.rs"]
mod tests;

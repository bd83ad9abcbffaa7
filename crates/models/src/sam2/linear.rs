//! A fully connected layer that stores its weight in PyTorch's `[out, in]` layout.
//!
//! Burn's `nn::Linear` keeps `[in, out]`, which would force a transpose on every import and
//! export of an official checkpoint. Keeping PyTorch's layout makes the state-dict mapping a
//! pure identity, at the price of a (free, view-only) transpose inside `forward`.

use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::tensor::{backend::Backend, Tensor};

use segburn_kernels as kernels;

/// Configuration of a [`Linear`] layer.
#[derive(Config, Debug)]
pub struct LinearConfig {
    /// Input features.
    pub d_input: usize,
    /// Output features.
    pub d_output: usize,
    /// Whether the layer adds a bias.
    #[config(default = true)]
    pub bias: bool,
}

/// `y = x Wᵀ + b`, with `W` of shape `[d_output, d_input]` as in `torch.nn.Linear`.
#[derive(Module, Debug)]
pub struct Linear<B: Backend> {
    /// `[d_output, d_input]`.
    pub weight: Param<Tensor<B, 2>>,
    /// `[d_output]`.
    pub bias: Option<Param<Tensor<B, 1>>>,
}

impl LinearConfig {
    /// Builds the layer with PyTorch's default initialisation: weight and bias both
    /// `U(±1/√d_input)` (`kaiming_uniform(a=√5)`).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Linear<B> {
        let init = Initializer::KaimingUniform {
            gain: 1.0 / 3.0f64.sqrt(),
            fan_out_only: false,
        };
        let weight = init.init_with(
            [self.d_output, self.d_input],
            Some(self.d_input),
            Some(self.d_output),
            device,
        );
        let bias = self.bias.then(|| {
            init.init_with(
                [self.d_output],
                Some(self.d_input),
                Some(self.d_output),
                device,
            )
        });
        Linear { weight, bias }
    }
}

impl<B: Backend> Linear<B> {
    /// `[..., d_input] -> [..., d_output]`, in the dtype of `input` (the f32 master weights
    /// are cast to it, so a bf16 input gives a bf16 product).
    pub fn forward<const D: usize>(&self, input: Tensor<B, D>) -> Tensor<B, D> {
        let mut shape = input.dims();
        let d_input = shape[D - 1];
        let rows = shape[..D - 1].iter().product();
        let dtype = input.dtype();
        let weight = self.weight.val().cast(dtype);
        let bias = self.bias.as_ref().map(|b| b.val().cast(dtype));
        let input = input.reshape([rows, d_input]);
        let output = kernels::linear(input, weight, bias);
        shape[D - 1] = self.d_output();
        output.reshape(shape)
    }

    /// Output features.
    pub fn d_output(&self) -> usize {
        self.weight.shape().dims::<2>()[0]
    }
}

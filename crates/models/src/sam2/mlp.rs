//! The small multi-layer perceptron used all over the SAM2 decoder (`sam2_utils.MLP`).

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{activation, backend::Backend, Tensor};

use segburn_kernels as kernels;

use super::linear::{Linear, LinearConfig};

/// Configuration of an [`Mlp`].
#[derive(Config, Debug)]
pub struct MlpConfig {
    /// Input features.
    pub input_dim: usize,
    /// Width of the hidden layers.
    pub hidden_dim: usize,
    /// Output features.
    pub output_dim: usize,
    /// Number of linear layers (at least 1).
    pub num_layers: usize,
    /// Whether a sigmoid follows the last layer (the IoU head).
    #[config(default = false)]
    pub sigmoid_output: bool,
    /// The activation between layers.
    #[config(default = "MlpActivation::Relu")]
    pub activation: MlpActivation,
}

/// The activation between an [`Mlp`]'s layers.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum MlpActivation {
    /// ReLU: every decoder MLP.
    Relu,
    /// Exact (erf) GELU: Hiera's MLPs (`nn.GELU()`).
    Gelu,
}

/// `num_layers` linear layers with an activation between them (never after the last one).
///
/// SAM2 uses ReLU in every decoder MLP (the transformer's feed-forward block, the hypernetworks,
/// the IoU head and the object-score head) and exact GELU in the Hiera blocks.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// `layers.{i}` in the official state dict.
    pub layers: Vec<Linear<B>>,
    sigmoid_output: bool,
    #[module(skip)]
    activation: MlpActivation,
}

impl MlpConfig {
    /// Builds the MLP; `num_layers` is clamped to at least 1.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Mlp<B> {
        let num_layers = self.num_layers.max(1);
        let layers = (0..num_layers)
            .map(|i| {
                let d_input = if i == 0 {
                    self.input_dim
                } else {
                    self.hidden_dim
                };
                let d_output = if i + 1 == num_layers {
                    self.output_dim
                } else {
                    self.hidden_dim
                };
                LinearConfig::new(d_input, d_output).init(device)
            })
            .collect();
        Mlp {
            layers,
            sigmoid_output: self.sigmoid_output,
            activation: self.activation,
        }
    }
}

impl<B: Backend> Mlp<B> {
    /// `[..., input_dim] -> [..., output_dim]`
    pub fn forward<const D: usize>(&self, input: Tensor<B, D>) -> Tensor<B, D> {
        let last = self.layers.len().saturating_sub(1);
        let mut x = input;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = match self.activation {
                    MlpActivation::Relu => activation::relu(x),
                    MlpActivation::Gelu => kernels::gelu(x),
                };
            }
        }
        if self.sigmoid_output {
            x = activation::sigmoid(x);
        }
        x
    }
}

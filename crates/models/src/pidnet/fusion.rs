//! The boundary-attention-guided fusion (Bag) of the P, I and D branches: where the D branch sees
//! a boundary, detail (P) wins; elsewhere context (I) wins. S/M use the light version.

use burn::module::Module;
use burn::tensor::activation::sigmoid;
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::{ConvBn, ConvBnConfig, PreActConv, PreActConvConfig};

/// Light_Bag (PIDNet-S/M): two 1×1 conv+BN branches, summed.
#[derive(Module, Debug)]
pub struct LightBag<B: Backend> {
    pub conv_p: ConvBn<B>,
    pub conv_i: ConvBn<B>,
}

impl<B: Backend> LightBag<B> {
    pub fn new(in_channels: usize, out_channels: usize, device: &B::Device) -> Self {
        Self {
            conv_p: ConvBnConfig::new(in_channels, out_channels, 1).init(device),
            conv_i: ConvBnConfig::new(in_channels, out_channels, 1).init(device),
        }
    }

    /// `p`, `i`, `d`: `[N, C, H, W]` each (the attention is per channel) → `[N, out, H, W]`.
    pub fn forward(&self, p: Tensor<B, 4>, i: Tensor<B, 4>, d: Tensor<B, 4>) -> Tensor<B, 4> {
        let attention = sigmoid(d);
        let p_add = self
            .conv_p
            .forward(i.clone() * (attention.clone().neg() + 1.0) + p.clone());
        let i_add = self.conv_i.forward(i + attention * p);
        p_add + i_add
    }
}

/// Bag (PIDNet-L): one pre-activation 3×3 conv on the gated blend.
#[derive(Module, Debug)]
pub struct Bag<B: Backend> {
    pub conv: PreActConv<B>,
}

impl<B: Backend> Bag<B> {
    pub fn new(in_channels: usize, out_channels: usize, device: &B::Device) -> Self {
        Self {
            conv: PreActConvConfig::new(in_channels, out_channels, 3).init(device),
        }
    }

    /// `p`, `i`, `d`: `[N, C, H, W]` each → `[N, out, H, W]`.
    pub fn forward(&self, p: Tensor<B, 4>, i: Tensor<B, 4>, d: Tensor<B, 4>) -> Tensor<B, 4> {
        let attention = sigmoid(d);
        self.conv
            .forward(p * attention.clone() + i * (attention.neg() + 1.0))
    }
}

/// The fusion module a PIDNet size uses (official attribute `dfm`).
// One per model, built once: the size difference between variants costs nothing, and Burn's
// Module derive does not see through a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum Fusion<B: Backend> {
    Light(LightBag<B>),
    Full(Bag<B>),
}

impl<B: Backend> Fusion<B> {
    pub fn forward(&self, p: Tensor<B, 4>, i: Tensor<B, 4>, d: Tensor<B, 4>) -> Tensor<B, 4> {
        match self {
            Fusion::Light(bag) => bag.forward(p, i, d),
            Fusion::Full(bag) => bag.forward(p, i, d),
        }
    }
}

//! Hiera's patch embedding: a 7×7 stride-4 convolution (padding 3) whose output the trunk keeps
//! channel-last (BHWC) from here on.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::PaddingConfig2d;
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::conv2d_in_input_dtype;

/// `patch_embed.proj` in the official state dict.
#[derive(Module, Debug)]
pub struct PatchEmbed<B: Backend> {
    /// `Conv2d(3 → embed_dim, k=7, s=4, p=3)` with bias.
    pub proj: Conv2d<B>,
}

impl<B: Backend> PatchEmbed<B> {
    /// Builds the convolution with PyTorch's default initialisation.
    pub fn new(embed_dim: usize, device: &B::Device) -> Self {
        Self {
            proj: Conv2dConfig::new([3, embed_dim], [7, 7])
                .with_stride([4, 4])
                .with_padding(PaddingConfig2d::Explicit(3, 3, 3, 3))
                .init(device),
        }
    }

    /// `[N, 3, H, W] -> [N, H/4, W/4, embed_dim]` (BHWC).
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 4> {
        conv2d_in_input_dtype(&self.proj, images).permute([0, 2, 3, 1])
    }
}

//! PagFM, the pixel-attention-guided fusion of the P branch (high resolution) with the I branch
//! (low resolution): a per-pixel similarity gate decides how much context to let in.

use burn::module::Module;
use burn::tensor::activation::sigmoid;
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::{resize_bilinear, ConvBn, ConvBnConfig};
use segburn_kernels::{channel_dot, gate_blend};

#[derive(Module, Debug)]
pub struct PagFm<B: Backend> {
    pub f_x: ConvBn<B>,
    pub f_y: ConvBn<B>,
}

impl<B: Backend> PagFm<B> {
    pub fn new(in_channels: usize, mid_channels: usize, device: &B::Device) -> Self {
        Self {
            f_x: ConvBnConfig::new(in_channels, mid_channels, 1).init(device),
            f_y: ConvBnConfig::new(in_channels, mid_channels, 1).init(device),
        }
    }

    /// `x`: P feature `[N, C, H, W]`; `y`: I feature `[N, C, h, w]` → `[N, C, H, W]`.
    pub fn forward(&self, x: Tensor<B, 4>, y: Tensor<B, 4>) -> Tensor<B, 4> {
        let [_, _, h, w] = x.dims();
        // The query is projected at low resolution and then upsampled (cheaper than upsampling
        // first); the official code does it in this order, so the numbers depend on it.
        let y_q = resize_bilinear(self.f_y.forward(y.clone()), [h, w]);
        let x_k = self.f_x.forward(x.clone());
        let similarity = sigmoid(channel_dot(x_k, y_q));
        let y = resize_bilinear(y, [h, w]);
        gate_blend(x, y, similarity)
    }
}

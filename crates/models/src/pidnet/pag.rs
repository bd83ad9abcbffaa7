//! PagFM, the pixel-attention-guided fusion of the P branch (high resolution) with the I branch
//! (low resolution): a per-pixel similarity gate decides how much context to let in.

use burn::module::Module;
use burn::tensor::activation::sigmoid;
use burn::tensor::{backend::Backend, Tensor};

use crate::nn::{resize_bilinear, ConvBn, ConvBnConfig};

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
        let similarity = sigmoid(sum_over_channels(x_k * y_q));
        let y = resize_bilinear(y, [h, w]);
        x * (similarity.clone().neg() + 1.0) + y * similarity
    }
}

/// `x.sum_dim(1)` for `[N, C, H, W]` as a product with a row of ones, `[N, 1, C] · [N, C, H·W]`:
/// Flex sums over a middle dimension element by element with strided reads, while the product
/// runs in its matrix kernel.
fn sum_over_channels<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, c, h, w] = x.dims();
    let ones = Tensor::<B, 3>::ones([n, 1, c], &x.device()).cast(x.dtype());
    ones.matmul(x.reshape([n, c, h * w])).reshape([n, 1, h, w])
}

//! Bilinear resizing with an explicit corner convention.
//!
//! Burn's `InterpolateOptions::new` defaults to `align_corners = true`; PyTorch's default (and
//! every interpolate inside PIDNet) is `false`. Calling these two functions instead of
//! `interpolate` keeps the choice visible at each call site. Both go through
//! [`kernels::interpolate_bilinear`], which picks segburn's own kernels where they are faster.

use burn::tensor::{backend::Backend, Tensor};

use segburn_kernels as kernels;

/// PyTorch `F.interpolate(x, size, mode='bilinear', align_corners=False)`.
pub fn resize_bilinear<B: Backend>(x: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 4> {
    kernels::interpolate_bilinear(x, size, false)
}

/// PyTorch `F.interpolate(x, size, mode='bilinear', align_corners=True)`: what the official
/// losses and evaluation use to bring 1/8 outputs to label resolution.
pub fn resize_bilinear_align_corners<B: Backend>(
    x: Tensor<B, 4>,
    size: [usize; 2],
) -> Tensor<B, 4> {
    kernels::interpolate_bilinear(x, size, true)
}

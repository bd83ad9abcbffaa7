//! Bilinear resizing with an explicit corner convention.
//!
//! Burn's `InterpolateOptions::new` defaults to `align_corners = true`; PyTorch's default (and
//! every interpolate inside PIDNet) is `false`. Calling these two functions instead of
//! `interpolate` keeps the choice visible at each call site.

use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{backend::Backend, Tensor};

/// PyTorch `F.interpolate(x, size, mode='bilinear', align_corners=False)`.
pub fn resize_bilinear<B: Backend>(x: Tensor<B, 4>, size: [usize; 2]) -> Tensor<B, 4> {
    let options = InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(false);
    interpolate(x, size, options)
}

/// PyTorch `F.interpolate(x, size, mode='bilinear', align_corners=True)`: what the official
/// losses and evaluation use to bring 1/8 outputs to label resolution.
pub fn resize_bilinear_align_corners<B: Backend>(
    x: Tensor<B, 4>,
    size: [usize; 2],
) -> Tensor<B, 4> {
    let options = InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(true);
    interpolate(x, size, options)
}

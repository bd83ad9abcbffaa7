//! The resize family: PyTorch's bilinear resize, forward and input gradient, both corner
//! conventions (`bilinear.rs`): separable, parallel over planes; 4.8× Flex's forward and 19×
//! its backward on six PIDNet-S shapes. Its autodiff op keeps the input's shape, not the input.
//!
//! Off the CPU's f32/f64 path, who resizes depends on whether a backward is needed: Burn's
//! `interpolate` has a bilinear backward on Flex (any dtype) but not on burn-cubecl 0.21 (CUDA,
//! wgpu, ROCm), whose backward panics. So training on those backends resizes by a composition
//! of `select`, `mul` and `add` (`composed.rs`), which autodiff differentiates on every
//! backend; their inference keeps Burn's one-kernel forward.

mod autodiff;
mod bilinear;
mod composed;
mod flex;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, InterpolateMode, InterpolateOptions};
use burn::tensor::Tensor;

pub use bilinear::{bilinear_forward, bilinear_input_grad, BilinearFloat, BilinearGeometry};
pub use composed::interpolate_bilinear_composed;

use crate::dispatch::{flex_primitive, from_flex, is_flex, route, same_backend, Route};

/// The resize kernels of a backend.
pub trait ResizeKernels: Backend {
    /// `[N, C, H, W] -> [N, C, oh, ow]`, bilinear.
    fn bilinear_forward(
        x: FloatTensor<Self>,
        output_size: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self>;

    /// `dL/dx` of [`ResizeKernels::bilinear_forward`] for an input of `input_shape`.
    fn bilinear_input_grad(
        input_shape: [usize; 4],
        output_grad: FloatTensor<Self>,
        align_corners: bool,
    ) -> FloatTensor<Self>;
}

/// PyTorch's `F.interpolate(x, size, mode='bilinear', align_corners)`, by our kernels on the
/// CPU in f32/f64 (in training with our input gradient); by
/// [`interpolate_bilinear_composed`] in training on other backends than Flex; by Burn's op
/// everywhere else.
pub fn interpolate_bilinear<B: Backend>(
    x: Tensor<B, 4>,
    size: [usize; 2],
    align_corners: bool,
) -> Tensor<B, 4> {
    match route::<B>(x.dtype()) {
        Route::Burn if is_flex::<B>() || !B::ad_enabled(&x.device()) => {
            let options = InterpolateOptions::new(InterpolateMode::Bilinear)
                .with_align_corners(align_corners);
            burn::tensor::module::interpolate(x, size, options)
        }
        Route::Burn => interpolate_bilinear_composed(x, size, align_corners),
        Route::OwnInference => from_flex(Flex::bilinear_forward(
            flex_primitive(x),
            size,
            align_corners,
        )),
        Route::OwnTraining => same_backend(autodiff::bilinear_tracked::<Flex>(
            same_backend(x),
            size,
            align_corners,
        )),
    }
}

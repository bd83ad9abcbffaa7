//! segburn's own CPU kernels, where Burn 0.21's Flex falls short in speed or accuracy.
//!
//! The kernels sit behind a backend-extension trait, [`CpuKernels`], implemented for `Flex`
//! (`flex.rs`, on plain slices: `conv.rs`); `autodiff_ops.rs` wraps them in autodiff
//! operations of their own for `Autodiff<Flex>`. [`conv2d`] uses them when training on the
//! CPU in f32 or f64 and calls Burn's op on every other backend (CUDA, inference on the CPU,
//! half precision), so nothing changes there.
//!
//! Why the dispatch compares types instead of asking for a `B: CpuKernels` bound: the models,
//! losses and trainers are generic over `B: Backend` in some 300 places, and the choice is
//! between two concrete types. The `TypeId` comparison is resolved at compile time.
//!
//! Kernels so far, all as im2col / col2im and one matrix product per image and group: the
//! convolution forward (accurate like PyTorch's GEMM path: PIDNet-S's boundary-head gradient
//! went from 4× PyTorch's error to 0.04×), its weight gradient (3.7× faster than Flex's on
//! PIDNet-S's shapes) and the input gradient of pointwise convolutions (3×3 ones stay Flex's,
//! which is as fast); and the bilinear resize, forward and input gradient, both corner
//! conventions (`bilinear.rs`: separable, parallel over planes). Flex's resize recomputes each
//! pixel's coordinates and runs its backward pass on one thread; ours is faster on every
//! PIDNet shape measured (load 5–6 on 2 cores): the loss's upsampling of 2×19×64×64 logits to
//! 512×512, 68 against 365 ms forward and 20 against 274 ms backward; 1/16 → 1/8 at 64
//! channels, 1.2 against 16 ms and 4 against 12 ms; six shapes together 5.1× forward and 10×
//! backward. It is also lighter: its autodiff op keeps the input's shape, not the input.
//! `cargo xtask bench-kernels` measures each against Burn's op.

mod autodiff_ops;
pub mod bilinear;
pub mod conv;
mod flex;

use std::any::{Any, TypeId};

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::Backend;
use burn::tensor::ops::{ConvOptions, FloatTensor, InterpolateMode, InterpolateOptions};
use burn::tensor::{DType, Tensor};

use autodiff_ops::{conv2d_with_own_kernels, interpolate_bilinear_with_own_kernels};

/// Kernels a backend computes with code of its own.
pub trait CpuKernels: Backend {
    /// `conv2d(x, weight)` without bias.
    fn conv2d_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `dL/dx` of `conv2d(x, weight)` given `dL/doutput`; same contract as Burn's
    /// `conv2d_x_backward`.
    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `dL/dweight` of `conv2d(x, weight)` given `dL/doutput`; same contract as Burn's
    /// `conv2d_weight_backward`.
    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `interpolate(x, output_size)` in bilinear mode with `align_corners`.
    fn bilinear_forward(
        x: FloatTensor<Self>,
        output_size: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self>;

    /// `dL/dx` of [`CpuKernels::bilinear_forward`] for an input of shape `input_shape`, given
    /// `dL/doutput` (whose shape gives the output size).
    fn bilinear_input_grad(
        input_shape: [usize; 4],
        output_grad: FloatTensor<Self>,
        align_corners: bool,
    ) -> FloatTensor<Self>;
}

/// The backend CPU training runs on.
type CpuTraining = Autodiff<Flex>;

/// Whether tensors of `B` in `dtype` go through our kernels.
fn uses_own_kernels<B: Backend>(dtype: DType) -> bool {
    TypeId::of::<B>() == TypeId::of::<CpuTraining>() && matches!(dtype, DType::F32 | DType::F64)
}

/// `conv2d(x, weight) + bias`, by our kernels (forward and gradients) when training on the CPU
/// in f32/f64, by Burn's op everywhere else.
pub fn conv2d<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    if !uses_own_kernels::<B>(x.dtype()) {
        return burn::tensor::module::conv2d(x, weight, bias, options);
    }
    let out: Tensor<B, 4> = same_backend(conv2d_with_own_kernels::<Flex>(
        same_backend(x),
        same_backend(weight),
        options,
    ));
    match bias {
        // Added by a plain broadcast, whose gradient Burn computes.
        Some(bias) => {
            let channels = bias.dims()[0];
            out + bias.reshape([1, channels, 1, 1])
        }
        None => out,
    }
}

/// Re-types a tensor between two names of the same backend (`From` and `To` are one type; the
/// caller compared their `TypeId`s).
fn same_backend<From: Backend, To: Backend, const D: usize>(
    tensor: Tensor<From, D>,
) -> Tensor<To, D> {
    match (Box::new(tensor) as Box<dyn Any>).downcast::<Tensor<To, D>>() {
        Ok(tensor) => *tensor,
        Err(_) => unreachable!("same_backend is called only when the backend types are equal"),
    }
}

/// PyTorch's `F.interpolate(x, size, mode='bilinear', align_corners)`, by our kernels (forward
/// and input gradient) when training on the CPU in f32/f64, by Burn's op everywhere else.
pub fn interpolate_bilinear<B: Backend>(
    x: Tensor<B, 4>,
    size: [usize; 2],
    align_corners: bool,
) -> Tensor<B, 4> {
    if !uses_own_kernels::<B>(x.dtype()) {
        let options =
            InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(align_corners);
        return burn::tensor::module::interpolate(x, size, options);
    }
    same_backend(interpolate_bilinear_with_own_kernels::<Flex>(
        same_backend(x),
        size,
        align_corners,
    ))
}

/// A fixed pseudo-random sequence in [-1, 1), for the kernels' unit tests.
#[cfg(test)]
fn test_values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

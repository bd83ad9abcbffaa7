//! The normalisation family: a training batch norm (batch statistics; `batch_norm.rs`) and a
//! layer norm along one axis (the transformers' `LayerNorm` and SAM2's `LayerNorm2d`;
//! `layer_norm.rs`), forward and gradients in a few passes with f64 sums, instead of some ten
//! composed ops each way and Flex's slow broadcasts of the per-pixel statistics.

mod autodiff;
mod batch_norm;
mod flex;
mod layer_norm;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorData};

pub use batch_norm::{batch_norm_backward, batch_norm_forward, BatchStatistics, NormGeometry};
pub use layer_norm::{layer_norm_backward, layer_norm_forward, LayerGeometry, LayerStatistics};

use crate::dispatch::{flex_primitive, from_flex, route, same_backend, Route};

/// The normalisation kernels of a backend.
pub trait NormKernels: Backend {
    /// A batch norm of `[N, C, H, W]` with the batch's statistics: the output, and the mean
    /// and biased variance per channel.
    fn batch_norm_train(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        eps: f64,
    ) -> (FloatTensor<Self>, BatchStatistics);

    /// `[dx, dweight, dbias]` of [`NormKernels::batch_norm_train`].
    fn batch_norm_train_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        statistics: &BatchStatistics,
        eps: f64,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];

    /// A layer norm of `x` along `axis`: the output and the per-position statistics.
    fn layer_norm_along(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        axis: usize,
        eps: f64,
    ) -> (FloatTensor<Self>, LayerStatistics);

    /// `[dx, dweight, dbias]` of [`NormKernels::layer_norm_along`].
    fn layer_norm_along_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        statistics: &LayerStatistics,
        axis: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];
}

/// A training batch norm of `[N, C, H, W]` by our kernels, when training on the CPU in f32/f64:
/// the output (with our gradients for the input, weight and bias) and the detached batch mean
/// and biased variance, `[C]` each. `None` on every other backend and dtype (the caller then
/// composes Burn's ops).
pub fn batch_norm_train<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 1>,
    bias: Tensor<B, 1>,
    eps: f64,
) -> Option<(Tensor<B, 4>, Tensor<B, 1>, Tensor<B, 1>)> {
    let dtype = x.dtype();
    if route::<B>(dtype) != Route::OwnTraining {
        return None;
    }
    let device = x.device();
    let (out, statistics) = autodiff::batch_norm_tracked::<Flex>(
        same_backend(x),
        same_backend(weight.cast(dtype)),
        same_backend(bias.cast(dtype)),
        eps,
    );
    let channel = |values: Vec<f64>| {
        let len = values.len();
        Tensor::<B, 1>::from_data(TensorData::new(values, [len]), &device).cast(dtype)
    };
    Some((
        same_backend(out),
        channel(statistics.mean),
        channel(statistics.var),
    ))
}

/// A layer norm of `x` along `axis` (the biased variance over that axis at each position, then
/// `weight` and `bias` per channel of it) by our kernels on the CPU in f32/f64, in training
/// with our gradients for the input, weight and bias. `None` on every other backend and dtype,
/// and where `weight` or `bias` does not have the axis' size (the caller then composes Burn's
/// ops).
pub fn layer_norm<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 1>,
    bias: Tensor<B, 1>,
    axis: usize,
    eps: f64,
) -> Option<Tensor<B, D>> {
    let dtype = x.dtype();
    let channels = *x.dims().get(axis)?;
    if weight.dims() != [channels] || bias.dims() != [channels] {
        return None;
    }
    let (weight, bias) = (weight.cast(dtype), bias.cast(dtype));
    match route::<B>(dtype) {
        Route::Burn => None,
        Route::OwnInference => {
            let [weight, bias] = [weight, bias].map(flex_primitive);
            let (out, _) = Flex::layer_norm_along(flex_primitive(x), weight, bias, axis, eps);
            Some(from_flex(out))
        }
        Route::OwnTraining => Some(same_backend(autodiff::layer_norm_tracked::<Flex, D>(
            same_backend(x),
            same_backend(weight),
            same_backend(bias),
            axis,
            eps,
        ))),
    }
}

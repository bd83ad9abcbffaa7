//! The linear family: `y = x Wᵀ + b` with PyTorch's `[out, in]` weight and its gradients, one
//! product each (`math.rs`; Flex's matmul zeroes and then copies every output, 3.6 % of the
//! SAM2 step).

mod autodiff;
mod flex;
mod math;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

pub use math::{linear_backward, linear_by_burn, linear_forward, LinearShape};

use crate::dispatch::{flex_primitive, from_flex, route, same_backend, Route};

/// The linear kernels of a backend.
pub trait LinearKernels: Backend {
    /// `x Wᵀ + b` for `x` `[rows, in]`, `W` `[out, in]`, `b` `[out]`.
    fn linear_layer(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self>;

    /// `(dx, dW, db)` of [`LinearKernels::linear_layer`]; `db` only `with_bias`.
    fn linear_layer_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        with_bias: bool,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        Option<FloatTensor<Self>>,
    );
}

/// `x Wᵀ + b` (`x` `[rows, in]`, `W` `[out, in]` as in PyTorch, `b` `[out]`), by our kernel on
/// the CPU in f32/f64 (in training with our gradients), by Burn's ops everywhere else.
pub fn linear<B: Backend>(
    x: Tensor<B, 2>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, 2> {
    let ([rows, inputs], [outputs, weight_inputs]) = (x.dims(), weight.dims());
    let fits = inputs == weight_inputs
        && bias.as_ref().is_none_or(|b| b.dims() == [outputs])
        && ![rows, inputs, outputs].contains(&0);
    let same_dtype =
        weight.dtype() == x.dtype() && bias.as_ref().is_none_or(|b| b.dtype() == x.dtype());
    match route::<B>(x.dtype()) {
        Route::Burn => linear_by_burn(x, weight, bias),
        _ if !fits || !same_dtype => linear_by_burn(x, weight, bias),
        Route::OwnInference => from_flex(Flex::linear_layer(
            flex_primitive(x),
            flex_primitive(weight),
            bias.map(flex_primitive),
        )),
        Route::OwnTraining => same_backend(autodiff::linear_tracked::<Flex>(
            same_backend(x),
            same_backend(weight),
            bias.map(same_backend),
        )),
    }
}

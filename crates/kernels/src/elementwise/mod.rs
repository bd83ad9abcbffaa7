//! The element-wise family: PyTorch's exact GELU in f32 with the `erf` its vectorised CPU
//! kernels use (`gelu.rs`; Flex's scalar `erff` made GELU ~8 % of the SAM2 step), and PagFM's
//! pixel gate (`pixel_gate.rs`): the channel dot product `Σ_c a·b`, the per-pixel scale and the
//! blend `x·(1 − s) + y·s`, each one pass instead of Burn's broadcasts.

mod autodiff;
mod flex;
mod gelu;
mod pixel_gate;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Tensor};

pub use gelu::{gelu_forward, gelu_grad};
pub use pixel_gate::GateFloat;

use crate::dispatch::{flex_primitive, from_flex, is_flex, route, same_backend, Route};

/// The element-wise kernels of a backend.
pub trait ElementwiseKernels: Backend {
    /// `x Φ(x)`, element-wise.
    fn exact_gelu(x: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `dL/dx` of [`ElementwiseKernels::exact_gelu`].
    fn exact_gelu_grad(x: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `Σ_c a·b` of two `[N, C, H, W]` maps, `[N, 1, H, W]`.
    fn channel_dot(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `x · s` for `[N, C, H, W]` `x` and a per-pixel `[N, 1, H, W]` `s`.
    fn scale_by_pixel(x: FloatTensor<Self>, s: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `x·(1 − s) + y·s` for `[N, C, H, W]` maps and a per-pixel `[N, 1, H, W]` `s`.
    fn gate_blend(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// `[dx, dy, ds]` of [`ElementwiseKernels::gate_blend`].
    fn gate_blend_grad(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];
}

/// PyTorch's exact GELU, `x Φ(x)`, element-wise: by our kernel (with PyTorch's CPU `erf`
/// approximation) on the CPU in f32, in training with our gradient; by Burn's op everywhere
/// else (CUDA, wgpu, f64, half precision), except in training on the GPU backends: there
/// Burn 0.21's `gelu_backward` is the derivative of the *tanh approximation* (burn-backend's
/// default, which burn-cubecl keeps; 2.9e-4 rel-L2 off the exact gradient on wgpu), so GELU is
/// written as `x · (1 + erf(x / √2)) / 2`, whose autodiff gradient is exact.
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    if !is_flex::<B>() && B::ad_enabled(&x.device()) {
        let half_x = x.clone() * 0.5;
        return half_x * (x * std::f64::consts::FRAC_1_SQRT_2).erf().add_scalar(1.0);
    }
    // The kernel takes f32 only (f64 keeps Burn's exact `erf`).
    let route = match x.dtype() {
        DType::F32 => route::<B>(DType::F32),
        _ => Route::Burn,
    };
    match route {
        Route::Burn => burn::tensor::activation::gelu(x),
        Route::OwnInference => from_flex(Flex::exact_gelu(flex_primitive(x))),
        Route::OwnTraining => same_backend(autodiff::gelu_tracked::<Flex, D>(same_backend(x))),
    }
}

/// `Σ_c a·b` over the channels of two `[N, C, H, W]` maps, `[N, 1, H, W]` (PagFM's gate
/// logit): by our kernels on the CPU in f32/f64 (in training with our gradient), by Burn's ops
/// everywhere else.
pub fn channel_dot<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>) -> Tensor<B, 4> {
    if a.dims() != b.dims() {
        return channel_dot_by_burn(a, b);
    }
    match route::<B>(a.dtype()) {
        Route::Burn => channel_dot_by_burn(a, b),
        Route::OwnInference => from_flex(Flex::channel_dot(flex_primitive(a), flex_primitive(b))),
        Route::OwnTraining => same_backend(autodiff::channel_dot_tracked::<Flex>(
            same_backend(a),
            same_backend(b),
        )),
    }
}

/// [`channel_dot`] by Burn's ops: the product, then the channel sum as `[N, 1, C] · [N, C, H·W]`
/// with a row of ones (Flex sums over a middle dimension element by element with strided
/// reads, while the product runs in its matrix kernel).
pub fn channel_dot_by_burn<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>) -> Tensor<B, 4> {
    let x = a * b;
    let [n, c, h, w] = x.dims();
    let ones = Tensor::<B, 3>::ones([n, 1, c], &x.device()).cast(x.dtype());
    ones.matmul(x.reshape([n, c, h * w])).reshape([n, 1, h, w])
}

/// `x·(1 − s) + y·s` for `[N, C, H, W]` maps and a per-pixel weight `s` `[N, 1, H, W]`
/// (PagFM's blend): by our kernels on the CPU in f32/f64 (in inference with the bits of Burn's
/// ops; in training with our gradients), by Burn's ops everywhere else.
pub fn gate_blend<B: Backend>(x: Tensor<B, 4>, y: Tensor<B, 4>, s: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, _, h, w] = x.dims();
    if x.dims() != y.dims() || s.dims() != [n, 1, h, w] {
        return gate_blend_by_burn(x, y, s);
    }
    match route::<B>(x.dtype()) {
        Route::Burn => gate_blend_by_burn(x, y, s),
        Route::OwnInference => {
            let [x, y, s] = [x, y, s].map(flex_primitive);
            from_flex(Flex::gate_blend(x, y, s))
        }
        Route::OwnTraining => same_backend(autodiff::gate_blend_tracked::<Flex>(
            same_backend(x),
            same_backend(y),
            same_backend(s),
        )),
    }
}

/// [`gate_blend`] by Burn's ops.
pub fn gate_blend_by_burn<B: Backend>(
    x: Tensor<B, 4>,
    y: Tensor<B, 4>,
    s: Tensor<B, 4>,
) -> Tensor<B, 4> {
    x * (s.clone().neg() + 1.0) + y * s
}

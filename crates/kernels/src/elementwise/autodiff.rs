//! The element-wise ops as autodiff operations of ours; each reads back its inputs.

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

use super::ElementwiseKernels;
use crate::autodiff::{read_back, record, tensor, tracked, OwnGradient};

#[derive(Debug)]
struct Gelu;

impl<B: ElementwiseKernels> OwnGradient<B, 1> for Gelu {
    type Kept = ();

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        _kept: (),
        output_grad: FloatTensor<B>,
        [needed]: [bool; 1],
    ) -> [Option<FloatTensor<B>>; 1] {
        let [x] = read_back(inputs);
        [needed.then(|| B::exact_gelu_grad(x, output_grad))]
    }
}

/// The exact GELU on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn gelu_tracked<B: ElementwiseKernels, const D: usize>(
    x: Tensor<Autodiff<B>, D>,
) -> Tensor<Autodiff<B>, D> {
    tensor(record(Gelu, [tracked(x)], &[0], |[x]| {
        (B::exact_gelu(x), ())
    }))
}

#[derive(Debug)]
struct ChannelDot;

impl<B: ElementwiseKernels> OwnGradient<B, 2> for ChannelDot {
    type Kept = ();

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        _kept: (),
        output_grad: FloatTensor<B>,
        [a_needed, b_needed]: [bool; 2],
    ) -> [Option<FloatTensor<B>>; 2] {
        let [a, b] = read_back(inputs);
        // d(Σ_c a·b)/da = b (and the other way round), times the output's gradient per pixel.
        let a_grad = a_needed.then(|| B::scale_by_pixel(b, output_grad.clone()));
        let b_grad = b_needed.then(|| B::scale_by_pixel(a, output_grad));
        [a_grad, b_grad]
    }
}

/// PagFM's channel dot product on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn channel_dot_tracked<B: ElementwiseKernels>(
    a: Tensor<Autodiff<B>, 4>,
    b: Tensor<Autodiff<B>, 4>,
) -> Tensor<Autodiff<B>, 4> {
    tensor(record(
        ChannelDot,
        [tracked(a), tracked(b)],
        &[0, 1],
        |[a, b]| (B::channel_dot(a, b), ()),
    ))
}

#[derive(Debug)]
struct GateBlend;

impl<B: ElementwiseKernels> OwnGradient<B, 3> for GateBlend {
    type Kept = ();

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        _kept: (),
        output_grad: FloatTensor<B>,
        _needed: [bool; 3],
    ) -> [Option<FloatTensor<B>>; 3] {
        let [x, y, s] = read_back(inputs);
        B::gate_blend_grad(x, y, s, output_grad).map(Some)
    }
}

/// PagFM's blend `x·(1 − s) + y·s` on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn gate_blend_tracked<B: ElementwiseKernels>(
    x: Tensor<Autodiff<B>, 4>,
    y: Tensor<Autodiff<B>, 4>,
    s: Tensor<Autodiff<B>, 4>,
) -> Tensor<Autodiff<B>, 4> {
    let inputs = [tracked(x), tracked(y), tracked(s)];
    tensor(record(GateBlend, inputs, &[0, 1, 2], |[x, y, s]| {
        (B::gate_blend(x, y, s), ())
    }))
}

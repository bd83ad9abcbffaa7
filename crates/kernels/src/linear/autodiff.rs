//! The linear as an autodiff operation of ours: it keeps the input and the weight. `N` is 2
//! without a bias (inputs `x`, `W`) and 3 with one (`x`, `W`, `b`).

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

use super::LinearKernels;
use crate::autodiff::{record, tensor, tracked, OwnGradient};

#[derive(Debug)]
struct Linear<const N: usize>;

impl<B: LinearKernels, const N: usize> OwnGradient<B, N> for Linear<N> {
    /// `x` and `W`.
    type Kept = [FloatTensor<B>; 2];

    fn gradients(
        self,
        _inputs: Vec<FloatTensor<B>>,
        [x, weight]: Self::Kept,
        output_grad: FloatTensor<B>,
        _needed: [bool; N],
    ) -> [Option<FloatTensor<B>>; N] {
        let (x_grad, weight_grad, bias_grad) = B::linear_layer_grad(x, weight, output_grad, N == 3);
        let mut gradients = [Some(x_grad), Some(weight_grad), bias_grad].into_iter();
        std::array::from_fn(|_| gradients.next().flatten())
    }
}

/// `x Wᵀ + b` on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn linear_tracked<B: LinearKernels>(
    x: Tensor<Autodiff<B>, 2>,
    weight: Tensor<Autodiff<B>, 2>,
    bias: Option<Tensor<Autodiff<B>, 1>>,
) -> Tensor<Autodiff<B>, 2> {
    let forward = |x: FloatTensor<B>, weight: FloatTensor<B>, bias| {
        let output = B::linear_layer(x.clone(), weight.clone(), bias);
        (output, [x, weight])
    };
    let (x, weight) = (tracked(x), tracked(weight));
    tensor(match bias {
        None => record(Linear::<2>, [x, weight], &[], |[x, weight]| {
            forward(x, weight, None)
        }),
        Some(bias) => record(
            Linear::<3>,
            [x, weight, tracked(bias)],
            &[],
            |[x, weight, bias]| forward(x, weight, Some(bias)),
        ),
    })
}

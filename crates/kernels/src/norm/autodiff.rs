//! The norms as autodiff operations of ours: the backward step reads back the input and uses
//! the statistics the forward pass kept.

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

use super::{BatchStatistics, LayerStatistics, NormKernels};
use crate::autodiff::{read_back, record, tensor, tracked, OwnGradient};

#[derive(Debug)]
struct BatchNorm;

impl<B: NormKernels> OwnGradient<B, 3> for BatchNorm {
    /// The weight, the batch statistics and `eps`.
    type Kept = (FloatTensor<B>, BatchStatistics, f64);

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        (weight, statistics, eps): Self::Kept,
        output_grad: FloatTensor<B>,
        _needed: [bool; 3],
    ) -> [Option<FloatTensor<B>>; 3] {
        let [x] = read_back(inputs);
        B::batch_norm_train_grad(x, weight, &statistics, eps, output_grad).map(Some)
    }
}

/// A training batch norm on `Autodiff<B>` by `B`'s own kernels: the output and the batch
/// statistics (not tracked).
pub(super) fn batch_norm_tracked<B: NormKernels>(
    x: Tensor<Autodiff<B>, 4>,
    weight: Tensor<Autodiff<B>, 1>,
    bias: Tensor<Autodiff<B>, 1>,
    eps: f64,
) -> (Tensor<Autodiff<B>, 4>, BatchStatistics) {
    let mut kept_statistics = None;
    let inputs = [tracked(x), tracked(weight), tracked(bias)];
    let output = record(BatchNorm, inputs, &[0], |[x, weight, bias]| {
        let (out, statistics) = B::batch_norm_train(x, weight.clone(), bias, eps);
        kept_statistics = Some(statistics.clone());
        (out, (weight, statistics, eps))
    });
    match kept_statistics {
        Some(statistics) => (tensor(output), statistics),
        None => unreachable!("record runs the forward pass"),
    }
}

#[derive(Debug)]
struct LayerNorm;

impl<B: NormKernels> OwnGradient<B, 3> for LayerNorm {
    /// The weight, the per-position statistics and the axis.
    type Kept = (FloatTensor<B>, LayerStatistics, usize);

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        (weight, statistics, axis): Self::Kept,
        output_grad: FloatTensor<B>,
        _needed: [bool; 3],
    ) -> [Option<FloatTensor<B>>; 3] {
        let [x] = read_back(inputs);
        B::layer_norm_along_grad(x, weight, &statistics, axis, output_grad).map(Some)
    }
}

/// A layer norm along `axis` on `Autodiff<B>` by `B`'s own kernels.
pub(super) fn layer_norm_tracked<B: NormKernels, const D: usize>(
    x: Tensor<Autodiff<B>, D>,
    weight: Tensor<Autodiff<B>, 1>,
    bias: Tensor<Autodiff<B>, 1>,
    axis: usize,
    eps: f64,
) -> Tensor<Autodiff<B>, D> {
    let inputs = [tracked(x), tracked(weight), tracked(bias)];
    tensor(record(LayerNorm, inputs, &[0], |[x, weight, bias]| {
        let (out, statistics) = B::layer_norm_along(x, weight.clone(), bias, axis, eps);
        (out, (weight, statistics, axis))
    }))
}

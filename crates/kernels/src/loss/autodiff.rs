//! The loss kernels as autodiff operations of ours: each reads back the logits; the class
//! log-probabilities keep each pixel's class and log-sum-exp, the mask sums keep the targets
//! (data, no gradient) and the focal loss's parameters.

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

use super::{Focal, LossKernels};
use crate::autodiff::{read_back, record, tensor, tracked, OwnGradient};

#[derive(Debug)]
struct ClassLogProbs;

impl<B: LossKernels> OwnGradient<B, 1> for ClassLogProbs {
    /// Each pixel's class and the log-sum-exp per pixel.
    type Kept = (Vec<usize>, FloatTensor<B>);

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        (classes, lse): Self::Kept,
        output_grad: FloatTensor<B>,
        [needed]: [bool; 1],
    ) -> [Option<FloatTensor<B>>; 1] {
        let [x] = read_back(inputs);
        [needed.then(|| B::class_log_probs_grad(x, &classes, lse, output_grad))]
    }
}

/// `log_softmax(x, dim=1)` gathered at `classes` on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn class_log_probs_tracked<B: LossKernels>(
    x: Tensor<Autodiff<B>, 4>,
    classes: Vec<usize>,
) -> Tensor<Autodiff<B>, 3> {
    tensor(record(ClassLogProbs, [tracked(x)], &[0], |[x]| {
        let (out, lse) = B::class_log_probs(x, &classes);
        (out, (classes, lse))
    }))
}

#[derive(Debug)]
struct MaskLossSums;

impl<B: LossKernels> OwnGradient<B, 1> for MaskLossSums {
    /// The targets and the focal loss's parameters.
    type Kept = (FloatTensor<B>, Focal);

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        (targets, focal): Self::Kept,
        output_grad: FloatTensor<B>,
        [needed]: [bool; 1],
    ) -> [Option<FloatTensor<B>>; 1] {
        let [logits] = read_back(inputs);
        [needed.then(|| B::mask_loss_sums_grad(logits, targets, focal, output_grad))]
    }
}

/// SAM2's per-mask loss sums on `Autodiff<B>`, by `B`'s own kernels; the targets are data.
pub(super) fn mask_loss_sums_tracked<B: LossKernels>(
    logits: Tensor<Autodiff<B>, 3>,
    targets: Tensor<B, 2>,
    focal: Focal,
) -> Tensor<Autodiff<B>, 3> {
    let targets = targets.into_primitive().tensor();
    tensor(record(MaskLossSums, [tracked(logits)], &[0], |[logits]| {
        let sums = B::mask_loss_sums(logits, targets.clone(), focal);
        (sums, (targets, focal))
    }))
}

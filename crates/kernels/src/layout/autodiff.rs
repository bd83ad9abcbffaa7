//! The layout copies as autodiff operations of ours: a copy's gradient is the inverse copy.

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

use super::{inverse_axes, LayoutKernels};
use crate::autodiff::{record, tensor, tracked, OwnGradient};

/// A permuted copy; its gradient is the inverse permutation, copied the same way.
#[derive(Debug)]
struct PermutedCopy;

impl<B: LayoutKernels> OwnGradient<B, 1> for PermutedCopy {
    /// The axes that undo the permutation.
    type Kept = Vec<usize>;

    fn gradients(
        self,
        _inputs: Vec<FloatTensor<B>>,
        inverse: Vec<usize>,
        output_grad: FloatTensor<B>,
        [needed]: [bool; 1],
    ) -> [Option<FloatTensor<B>>; 1] {
        [needed.then(|| B::permuted_copy(output_grad, &inverse))]
    }
}

/// `x.permute(axes)` copied row-major on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn permute_tracked<B: LayoutKernels, const D: usize>(
    x: Tensor<Autodiff<B>, D>,
    axes: [usize; D],
) -> Tensor<Autodiff<B>, D> {
    tensor(record(PermutedCopy, [tracked(x)], &[], |[x]| {
        (B::permuted_copy(x, &axes), inverse_axes(&axes))
    }))
}

/// The block-to-space copy; its gradient is the space-to-block copy.
#[derive(Debug)]
struct BlocksToSpace;

impl<B: LayoutKernels> OwnGradient<B, 1> for BlocksToSpace {
    /// The block size.
    type Kept = usize;

    fn gradients(
        self,
        _inputs: Vec<FloatTensor<B>>,
        block: usize,
        output_grad: FloatTensor<B>,
        [needed]: [bool; 1],
    ) -> [Option<FloatTensor<B>>; 1] {
        [needed.then(|| B::space_to_blocks(output_grad, block))]
    }
}

/// `[N, C·k·k, H, W] -> [N, C, k·H, k·W]` on `Autodiff<B>`, by `B`'s own kernels.
pub(crate) fn blocks_to_space_tracked<B: LayoutKernels>(
    x: Tensor<Autodiff<B>, 4>,
    block: usize,
) -> Tensor<Autodiff<B>, 4> {
    tensor(record(BlocksToSpace, [tracked(x)], &[], |[x]| {
        (B::blocks_to_space(x, block), block)
    }))
}

//! The bilinear resize as an autodiff operation of ours: its backward step needs only the
//! input's shape, not its values (Burn's op keeps the whole input for its backward pass).

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

use super::ResizeKernels;
use crate::autodiff::{record, tensor, tracked, OwnGradient};

#[derive(Debug)]
struct Bilinear;

impl<B: ResizeKernels> OwnGradient<B, 1> for Bilinear {
    /// The input's shape and the corner convention.
    type Kept = ([usize; 4], bool);

    fn gradients(
        self,
        _inputs: Vec<FloatTensor<B>>,
        (input_shape, align_corners): Self::Kept,
        output_grad: FloatTensor<B>,
        [needed]: [bool; 1],
    ) -> [Option<FloatTensor<B>>; 1] {
        [needed.then(|| B::bilinear_input_grad(input_shape, output_grad, align_corners))]
    }
}

/// `interpolate(x, size)` in bilinear mode on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn bilinear_tracked<B: ResizeKernels>(
    x: Tensor<Autodiff<B>, 4>,
    size: [usize; 2],
    align_corners: bool,
) -> Tensor<Autodiff<B>, 4> {
    let input_shape = x.dims();
    tensor(record(Bilinear, [tracked(x)], &[], |[x]| {
        let output = B::bilinear_forward(x, size, align_corners);
        (output, (input_shape, align_corners))
    }))
}

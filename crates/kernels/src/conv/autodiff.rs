//! The convolution as an autodiff operation of ours: the backward step reads back the input
//! and the weight and runs our input and weight gradients (each only where it is needed: the
//! first layer's input needs none).

use burn::backend::Autodiff;
use burn::tensor::ops::{ConvOptions, FloatTensor};
use burn::tensor::Tensor;

use super::ConvKernels;
use crate::autodiff::{read_back, record, tensor, tracked, OwnGradient};

#[derive(Debug)]
struct Conv2d;

impl<B: ConvKernels> OwnGradient<B, 2> for Conv2d {
    type Kept = ConvOptions<2>;

    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        options: ConvOptions<2>,
        output_grad: FloatTensor<B>,
        [x_needed, weight_needed]: [bool; 2],
    ) -> [Option<FloatTensor<B>>; 2] {
        let [x, weight] = read_back(inputs);
        let weight_grad = weight_needed.then(|| {
            B::conv2d_weight_grad(
                x.clone(),
                weight.clone(),
                output_grad.clone(),
                options.clone(),
            )
        });
        let x_grad = x_needed.then(|| B::conv2d_input_grad(x, weight, output_grad, options));
        [x_grad, weight_grad]
    }
}

/// `conv2d(x, weight)` (no bias) on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn conv2d_tracked<B: ConvKernels>(
    x: Tensor<Autodiff<B>, 4>,
    weight: Tensor<Autodiff<B>, 4>,
    options: ConvOptions<2>,
) -> Tensor<Autodiff<B>, 4> {
    tensor(record(
        Conv2d,
        [tracked(x), tracked(weight)],
        &[0, 1],
        |[x, weight]| {
            let output = B::conv2d_forward(x, weight, None, options.clone());
            (output, options)
        },
    ))
}

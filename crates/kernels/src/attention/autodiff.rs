//! Multi-head attention as an autodiff operation of ours: it keeps q, k, v and the softmax's
//! row statistics, from which the backward step recomputes the probabilities tile by tile.

use burn::backend::Autodiff;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

use super::AttentionKernels;
use crate::autodiff::{record, tensor, tracked, OwnGradient};

#[derive(Debug)]
struct Attention;

impl<B: AttentionKernels> OwnGradient<B, 3> for Attention {
    /// q, k, v, what the forward saved for the gradient, and the number of heads.
    type Kept = ([FloatTensor<B>; 4], usize);

    fn gradients(
        self,
        _inputs: Vec<FloatTensor<B>>,
        ([q, k, v, saved], heads): Self::Kept,
        output_grad: FloatTensor<B>,
        _needed: [bool; 3],
    ) -> [Option<FloatTensor<B>>; 3] {
        B::multi_head_attention_grad(q, k, v, saved, heads, output_grad).map(Some)
    }
}

/// Multi-head attention on `Autodiff<B>`, by `B`'s own kernels.
pub(super) fn attention_tracked<B: AttentionKernels>(
    q: Tensor<Autodiff<B>, 3>,
    k: Tensor<Autodiff<B>, 3>,
    v: Tensor<Autodiff<B>, 3>,
    heads: usize,
) -> Tensor<Autodiff<B>, 3> {
    let inputs = [tracked(q), tracked(k), tracked(v)];
    tensor(record(Attention, inputs, &[], |[q, k, v]| {
        let (out, saved) = B::multi_head_attention(q.clone(), k.clone(), v.clone(), heads);
        (out, ([q, k, v, saved], heads))
    }))
}

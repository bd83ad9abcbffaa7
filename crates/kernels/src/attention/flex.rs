//! [`AttentionKernels`] on Flex: the kernels on Flex's buffers in f32 or f64, Burn's ops for
//! other float types and shapes the kernels do not take.

use burn::backend::{Autodiff, Flex};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Element, Tensor, TensorPrimitive};
use burn_flex::FlexTensor;

use super::{
    attention_and_probs_by_burn, attention_backward, attention_forward, AttentionFloat,
    AttentionKernels, AttentionShape,
};
use crate::flex_buffers::{
    burn_tensor, contiguous, dims, flex_tensor, float_type, slice, tensor_of,
};

impl AttentionKernels for Flex {
    fn multi_head_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        heads: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let own = match float_type(&[&q, &k, &v]) {
            Some(DType::F32) => attend::<f32>(&q, &k, &v, heads),
            Some(_) => attend::<f64>(&q, &k, &v, heads),
            None => None,
        };
        own.unwrap_or_else(|| attention_by_burn(q, k, v, heads))
    }

    fn multi_head_attention_grad(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        probs: FloatTensor<Self>,
        heads: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        let operands = [&q, &k, &v, &probs, &output_grad];
        let own = match float_type(&operands) {
            Some(DType::F32) => attend_grad::<f32>(operands, heads),
            Some(_) => attend_grad::<f64>(operands, heads),
            None => None,
        };
        own.unwrap_or_else(|| attention_grad_by_burn(q, k, v, heads, output_grad))
    }
}

/// The shape of an attention of `[B, Nq, H·d]` queries, `[B, Nk, H·d]` keys and `[B, Nk, H·dv]`
/// values; `None` where they do not fit together.
fn attention_shape(
    q: &FlexTensor,
    k: &FlexTensor,
    v: &FlexTensor,
    heads: usize,
) -> Option<AttentionShape> {
    let [batch, queries, width]: [usize; 3] = dims(q).try_into().ok()?;
    let [_, keys, value_width]: [usize; 3] = dims(v).try_into().ok()?;
    let shape = AttentionShape {
        batch,
        queries,
        keys,
        heads,
        head_dim: width.checked_div(heads)?,
        value_dim: value_width.checked_div(heads)?,
    };
    let divides = shape.head_dim * heads == width && shape.value_dim * heads == value_width;
    (divides && dims(k) == [batch, keys, width]).then_some(shape)
}

fn attend<T: AttentionFloat + Element + bytemuck::Pod>(
    q: &FlexTensor,
    k: &FlexTensor,
    v: &FlexTensor,
    heads: usize,
) -> Option<(FlexTensor, FlexTensor)> {
    let shape = attention_shape(q, k, v, heads)?;
    let [q, k, v] = [q, k, v].map(contiguous);
    let [q, k, v] = [&q, &k, &v].map(|x| slice::<T>(x));
    if !shape.fits(q, k, v) {
        return None;
    }
    let (out, probs) = attention_forward(q, k, v, &shape);
    let s = shape;
    Some((
        tensor_of(out, vec![s.batch, s.queries, s.heads * s.value_dim]),
        tensor_of(probs, vec![s.batch, s.heads, s.queries, s.keys]),
    ))
}

fn attend_grad<T: AttentionFloat + Element + bytemuck::Pod>(
    operands: [&FlexTensor; 5],
    heads: usize,
) -> Option<[FlexTensor; 3]> {
    let [q, k, v, probs, output_grad] = operands;
    let shape = attention_shape(q, k, v, heads)?;
    let s = shape;
    let shapes_fit = dims(probs) == [s.batch, s.heads, s.queries, s.keys]
        && dims(output_grad) == [s.batch, s.queries, s.heads * s.value_dim];
    if !shapes_fit {
        return None;
    }
    let contiguous = operands.map(contiguous);
    let [q, k, v, probs, output_grad] = [0, 1, 2, 3, 4].map(|i| slice::<T>(&contiguous[i]));
    if !shape.fits(q, k, v) {
        return None;
    }
    let [dq, dk, dv] = attention_backward(q, k, v, probs, output_grad, &shape);
    Some([
        tensor_of(dq, dims(&contiguous[0])),
        tensor_of(dk, dims(&contiguous[1])),
        tensor_of(dv, dims(&contiguous[2])),
    ])
}

/// [`AttentionKernels::multi_head_attention`] by Burn's ops, for the dtypes the kernel does not take.
fn attention_by_burn(
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    heads: usize,
) -> (FlexTensor, FlexTensor) {
    let [q, k, v] = [q, k, v].map(burn_tensor::<3>);
    let (out, probs) = attention_and_probs_by_burn(q, k, v, heads);
    (flex_tensor(out), flex_tensor(probs))
}

/// [`AttentionKernels::multi_head_attention_grad`] by Burn's ops: the gradients of `Σ out · output_grad`
/// through [`attention_and_probs_by_burn`] on `Autodiff<Flex>` (which recomputes the
/// probabilities).
fn attention_grad_by_burn(
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    heads: usize,
    output_grad: FlexTensor,
) -> [FlexTensor; 3] {
    let tracked = |x: FlexTensor| {
        Tensor::<Autodiff<Flex>, 3>::from_inner(Tensor::from_primitive(TensorPrimitive::Float(x)))
            .require_grad()
    };
    let [q, k, v] = [q, k, v].map(tracked);
    let weights = Tensor::<Autodiff<Flex>, 3>::from_inner(Tensor::from_primitive(
        TensorPrimitive::Float(output_grad),
    ));
    let (out, _) = attention_and_probs_by_burn(q.clone(), k.clone(), v.clone(), heads);
    let grads = (out * weights).sum().backward();
    [q, k, v].map(|x| match x.grad(&grads) {
        Some(grad) => grad.into_primitive().tensor(),
        None => unreachable!("q, k and v require a gradient"),
    })
}

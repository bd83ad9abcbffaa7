//! [`AttentionKernels`] on Flex: the kernels on Flex's buffers in f32 or f64, Burn's ops for
//! other float types and shapes the kernels do not take. The kernels save the softmax's row
//! statistics for the gradient as an f64 `[B, H, Nq, 2]` tensor; Burn's path saves an empty
//! one, and its gradient recomputes the attention.

use burn::backend::{Autodiff, Flex};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Element, Tensor, TensorPrimitive};
use burn_flex::FlexTensor;

use super::softmax::STATS_PER_ROW;
use super::{
    attention_and_probs_by_burn, attention_backward, attention_forward, AttentionFloat,
    AttentionKernels, AttentionShape, TokenRows,
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
        saved: FloatTensor<Self>,
        heads: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        let operands = [&q, &k, &v, &output_grad];
        let own = match (float_type(&operands), saved.dtype()) {
            (Some(DType::F32), DType::F64) => attend_grad::<f32>(operands, &saved, heads),
            (Some(_), DType::F64) => attend_grad::<f64>(operands, &saved, heads),
            _ => None,
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
    let copies = [q, k, v].map(row_major_copy);
    let [q, k, v] = [(q, &copies[0]), (k, &copies[1]), (v, &copies[2])]
        .map(|(x, copy)| token_rows::<T>(x, copy));
    if !shape.fits(q, k, v) {
        return None;
    }
    let (out, stats) = attention_forward(q, k, v, &shape);
    let s = shape;
    Some((
        tensor_of(out, vec![s.batch, s.queries, s.heads * s.value_dim]),
        tensor_of(stats, vec![s.batch, s.heads, s.queries, STATS_PER_ROW]),
    ))
}

fn attend_grad<T: AttentionFloat + Element + bytemuck::Pod>(
    operands: [&FlexTensor; 4],
    stats: &FlexTensor,
    heads: usize,
) -> Option<[FlexTensor; 3]> {
    let [q, k, v, output_grad] = operands;
    let shape = attention_shape(q, k, v, heads)?;
    let s = shape;
    let shapes_fit = dims(stats) == [s.batch, s.heads, s.queries, STATS_PER_ROW]
        && dims(output_grad) == [s.batch, s.queries, s.heads * s.value_dim];
    if !shapes_fit {
        return None;
    }
    let stats = contiguous(stats);
    let stats = slice::<f64>(&stats);
    let output_grad = contiguous(output_grad);
    let output_grad = slice::<T>(&output_grad);
    let copies = [q, k, v].map(row_major_copy);
    let [q, k, v] = [(q, &copies[0]), (k, &copies[1]), (v, &copies[2])]
        .map(|(x, copy)| token_rows::<T>(x, copy));
    if !shape.fits(q, k, v) || stats.len() != s.stats_len() || output_grad.len() != s.out_len() {
        return None;
    }
    let [dq, dk, dv] = attention_backward(q, k, v, stats, output_grad, &shape);
    let rows = |tokens: usize, width: usize| vec![s.batch, tokens, s.heads * width];
    Some([
        tensor_of(dq, rows(s.queries, s.head_dim)),
        tensor_of(dk, rows(s.keys, s.head_dim)),
        tensor_of(dv, rows(s.keys, s.value_dim)),
    ])
}

/// The row stride at which the `[B, N, W]` rows of `x` can be read in place: unit column
/// stride and rows evenly spaced across the images (a row-major tensor, or a column range of
/// a wider one, as Hiera's q, k and v are of its qkv rows). `None` for other layouts.
fn in_place_stride(x: &FlexTensor) -> Option<usize> {
    let layout = x.layout();
    let (shape, strides) = (layout.shape(), layout.strides());
    if shape.num_dims() != 3 {
        return None;
    }
    let [batch, tokens, width] = [shape[0], shape[1], shape[2]];
    let row = usize::try_from(strides[1]).ok()?;
    let evenly_spaced = batch == 1 || usize::try_from(strides[0]).ok() == Some(row * tokens);
    (strides[2] == 1 && row >= width && evenly_spaced).then_some(row)
}

/// A row-major copy of `x` where its rows cannot be read in place.
fn row_major_copy(x: &FlexTensor) -> Option<FlexTensor> {
    in_place_stride(x).is_none().then(|| contiguous(x))
}

/// The rows of `x` (the caller checked its dtype is `T`): in place, or from `copy`, the
/// [`row_major_copy`] made of it.
fn token_rows<'a, T: Element + bytemuck::Pod>(
    x: &'a FlexTensor,
    copy: &'a Option<FlexTensor>,
) -> TokenRows<'a, T> {
    match (copy, in_place_stride(x)) {
        (Some(copy), _) => TokenRows::packed(slice::<T>(copy), dims(copy)[2]),
        (None, Some(stride)) => TokenRows {
            data: x
                .storage::<T>()
                .get(x.layout().start_offset()..)
                .unwrap_or(&[]),
            stride,
        },
        // Not reached (`row_major_copy` copies exactly these); an empty buffer fits no shape.
        (None, None) => TokenRows::packed(&[], 1),
    }
}

/// [`AttentionKernels::multi_head_attention`] by Burn's ops, for the dtypes the kernel does not
/// take; it saves nothing (an empty tensor), so its gradient recomputes the attention.
fn attention_by_burn(
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    heads: usize,
) -> (FlexTensor, FlexTensor) {
    let [q, k, v] = [q, k, v].map(burn_tensor::<3>);
    let (out, _) = attention_and_probs_by_burn(q, k, v, heads);
    (flex_tensor(out), tensor_of(Vec::<f64>::new(), vec![0]))
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

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    #[test]
    fn column_ranges_are_read_in_place_and_transposes_copied() {
        let values: Vec<f32> = (0..2 * 3 * 12).map(|v| v as f32).collect();
        let qkv = tensor_of(values, vec![2, 3, 12]);
        let k = Tensor::<Flex, 3>::from_primitive(TensorPrimitive::Float(qkv))
            .narrow(2, 4, 4)
            .into_primitive()
            .tensor();
        assert_eq!(in_place_stride(&k), Some(12));
        assert!(row_major_copy(&k).is_none());
        // Row 1 of image 1 (row 4 overall) starts at 4 · 12, plus k's column offset 4.
        let rows = token_rows::<f32>(&k, &None);
        assert_eq!(rows.data[4 * rows.stride..][..4], [52.0, 53.0, 54.0, 55.0]);
        let swapped = Tensor::<Flex, 3>::from_data(
            TensorData::new(vec![0.0f32; 6], [1, 2, 3]),
            &Default::default(),
        )
        .swap_dims(1, 2)
        .into_primitive()
        .tensor();
        assert_eq!(in_place_stride(&swapped), None);
        assert!(row_major_copy(&swapped).is_some());
    }
}

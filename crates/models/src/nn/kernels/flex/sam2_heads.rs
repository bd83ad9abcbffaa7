//! The Flex side of the kernels SAM2's heads use: the block-to-space copy of the transposed
//! convolution, the mask-loss sums and multi-head attention (shape checks, dtype dispatch and
//! Burn's fallbacks).

use burn::backend::{Autodiff, Flex};
use burn::tensor::{Element, Tensor, TensorPrimitive};
use burn_flex::FlexTensor;

use super::super::attention::{
    attention_and_probs_by_burn, attention_backward, attention_forward, AttentionFloat,
    AttentionShape,
};
use super::super::batch_norm::NormFloat;
use super::super::blocks_to_space::{blocks_to_space, space_to_blocks, Blocks};
use super::super::linear::{linear_backward, linear_by_burn, linear_forward, LinearShape};
use super::super::mask_loss::{
    mask_loss_sums, mask_loss_sums_by_burn, mask_loss_sums_grad, Focal, MaskRows, MASK_LOSS_SUMS,
};
use super::super::product::GemmFloat;
use super::{contiguous, dims, slice, tensor_of};

/// Which way [`move_blocks`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    /// `[N, C·k·k, H, W] -> [N, C, k·H, k·W]`.
    ToSpace,
    /// `[N, C, k·H, k·W] -> [N, C·k·k, H, W]`.
    ToBlocks,
}

/// The small-side shape of `x` going `direction`; `None` where `x` is not 4-D or its sizes
/// are not multiples of what `k` needs.
fn blocks_of(x: &FlexTensor, k: usize, direction: Direction) -> Option<Blocks> {
    let [batch, channels, h, w]: [usize; 4] = dims(x).try_into().ok()?;
    match direction {
        Direction::ToSpace => (k > 0 && channels % (k * k) == 0).then_some(Blocks {
            batch,
            channels: channels / (k * k),
            height: h,
            width: w,
            block: k,
        }),
        Direction::ToBlocks => (k > 0 && h % k == 0 && w % k == 0).then_some(Blocks {
            batch,
            channels,
            height: h / k,
            width: w / k,
            block: k,
        }),
    }
}

pub(super) fn move_blocks<T: Element + bytemuck::Pod + Default>(
    x: &FlexTensor,
    k: usize,
    direction: Direction,
) -> Option<FlexTensor> {
    let blocks = blocks_of(x, k, direction)?;
    let x = contiguous(x);
    let values = slice::<T>(&x);
    if values.len() != blocks.len() {
        return None;
    }
    let (c, h, w) = (blocks.channels, blocks.height, blocks.width);
    let (moved, shape) = match direction {
        Direction::ToSpace => (
            blocks_to_space(values, &blocks),
            [blocks.batch, c, k * h, k * w],
        ),
        Direction::ToBlocks => (
            space_to_blocks(values, &blocks),
            [blocks.batch, c * k * k, h, w],
        ),
    };
    Some(tensor_of(moved, shape.to_vec()))
}

/// [`move_blocks`] by Burn's ops (a 6-D permutation), for the dtypes and shapes the kernel does
/// not take.
pub(super) fn blocks_by_burn(x: FlexTensor, k: usize, direction: Direction) -> FlexTensor {
    let x = Tensor::<Flex, 4>::from_primitive(TensorPrimitive::Float(x));
    let [n, c, h, w] = x.dims();
    let k = k.max(1);
    let out = match direction {
        Direction::ToSpace => {
            let c = c / (k * k);
            x.reshape([n, c, k, k, h, w])
                .permute([0, 1, 4, 2, 5, 3])
                .reshape([n, c, k * h, k * w])
        }
        Direction::ToBlocks => {
            let (h, w) = (h / k, w / k);
            x.reshape([n, c, h, k, w, k])
                .permute([0, 1, 3, 5, 2, 4])
                .reshape([n, c * k * k, h, w])
        }
    };
    out.into_primitive().tensor()
}

/// The `[N, M, L]` rows of mask logits, if the targets are `[N, L]`.
fn mask_rows(logits: &FlexTensor, targets: &FlexTensor, focal: Focal) -> Option<MaskRows> {
    let [objects, masks, pixels]: [usize; 3] = dims(logits).try_into().ok()?;
    (dims(targets) == [objects, pixels]).then_some(MaskRows {
        objects,
        masks,
        pixels,
        focal,
    })
}

pub(super) fn mask_sums<T: NormFloat + Element + bytemuck::Pod>(
    logits: &FlexTensor,
    targets: &FlexTensor,
    focal: Focal,
) -> Option<FlexTensor> {
    let rows = mask_rows(logits, targets, focal)?;
    let [logits, targets] = [logits, targets].map(contiguous);
    let (logits, targets) = (slice::<T>(&logits), slice::<T>(&targets));
    if !rows.fits(logits, targets) {
        return None;
    }
    let sums = mask_loss_sums(logits, targets, &rows);
    Some(tensor_of(
        sums,
        vec![rows.objects, rows.masks, MASK_LOSS_SUMS],
    ))
}

pub(super) fn mask_sums_grad<T: NormFloat + Element + bytemuck::Pod>(
    logits: &FlexTensor,
    targets: &FlexTensor,
    focal: Focal,
    output_grad: &FlexTensor,
) -> Option<FlexTensor> {
    let rows = mask_rows(logits, targets, focal)?;
    if dims(output_grad) != [rows.objects, rows.masks, MASK_LOSS_SUMS] {
        return None;
    }
    let [logits, targets, output_grad] = [logits, targets, output_grad].map(contiguous);
    let (x, t) = (slice::<T>(&logits), slice::<T>(&targets));
    if !rows.fits(x, t) {
        return None;
    }
    let grad = mask_loss_sums_grad(x, t, slice::<T>(&output_grad), &rows);
    Some(tensor_of(grad, dims(&logits)))
}

/// [`CpuKernels::mask_loss_sums_grad`] by Burn's ops: the gradient of `Σ sums · output_grad`
/// through [`mask_loss_sums_by_burn`] on `Autodiff<Flex>`.
pub(super) fn mask_sums_grad_by_burn(
    logits: FlexTensor,
    targets: FlexTensor,
    focal: Focal,
    output_grad: FlexTensor,
) -> FlexTensor {
    let float = |t: FlexTensor| TensorPrimitive::Float(t);
    let logits = Tensor::<Autodiff<Flex>, 3>::from_inner(Tensor::from_primitive(float(logits)))
        .require_grad();
    let targets = Tensor::<Autodiff<Flex>, 2>::from_inner(Tensor::from_primitive(float(targets)));
    let weights =
        Tensor::<Autodiff<Flex>, 3>::from_inner(Tensor::from_primitive(float(output_grad)));
    let total = (mask_loss_sums_by_burn(logits.clone(), targets, focal) * weights).sum();
    let grads = total.backward();
    match logits.grad(&grads) {
        Some(grad) => grad.into_primitive().tensor(),
        None => unreachable!("the logits require a gradient"),
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

pub(super) fn attend<T: AttentionFloat + Element + bytemuck::Pod>(
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

pub(super) fn attend_grad<T: AttentionFloat + Element + bytemuck::Pod>(
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

/// [`CpuKernels::multi_head_attention`] by Burn's ops, for the dtypes the kernel does not take.
pub(super) fn attention_by_burn(
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    heads: usize,
) -> (FlexTensor, FlexTensor) {
    let [q, k, v] = [q, k, v].map(|x| Tensor::<Flex, 3>::from_primitive(TensorPrimitive::Float(x)));
    let (out, probs) = attention_and_probs_by_burn(q, k, v, heads);
    (
        out.into_primitive().tensor(),
        probs.into_primitive().tensor(),
    )
}

/// [`CpuKernels::multi_head_attention_grad`] by Burn's ops: the gradients of `Σ out · output_grad`
/// through [`attention_and_probs_by_burn`] on `Autodiff<Flex>` (which recomputes the
/// probabilities).
pub(super) fn attention_grad_by_burn(
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

/// The shape of `x Wᵀ` for a 2-D `x` and `W` of the same width.
fn linear_shape(x: &FlexTensor, weight: &FlexTensor) -> Option<LinearShape> {
    let [rows, inputs]: [usize; 2] = dims(x).try_into().ok()?;
    let [outputs, weight_inputs]: [usize; 2] = dims(weight).try_into().ok()?;
    (inputs == weight_inputs).then_some(LinearShape {
        rows,
        inputs,
        outputs,
    })
}

/// The linear by [`linear_forward`]; `None` where the shapes do not fit.
pub(super) fn project<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
) -> Option<FlexTensor> {
    let shape = linear_shape(x, weight)?;
    let [x, weight] = [x, weight].map(contiguous);
    let bias = bias.map(contiguous);
    let (x, weight, bias) = (
        slice::<T>(&x),
        slice::<T>(&weight),
        bias.as_ref().map(slice::<T>),
    );
    if !shape.fits(x, weight, bias) {
        return None;
    }
    let y = linear_forward(x, weight, bias, &shape);
    Some(tensor_of(y, vec![shape.rows, shape.outputs]))
}

/// The linear's gradients by [`linear_backward`] for `[x, W, dL/dy]`; `None` where the shapes
/// do not fit.
pub(super) fn project_grad<T: GemmFloat + Element + bytemuck::Pod>(
    operands: [&FlexTensor; 3],
    with_bias: bool,
) -> Option<(FlexTensor, FlexTensor, Option<FlexTensor>)> {
    let [x, weight, output_grad] = operands;
    let s = linear_shape(x, weight)?;
    if dims(output_grad) != [s.rows, s.outputs] {
        return None;
    }
    let contiguous = operands.map(contiguous);
    let [x, weight, output_grad] = [0, 1, 2].map(|i| slice::<T>(&contiguous[i]));
    if !s.fits(x, weight, None) {
        return None;
    }
    let (dx, dw, db) = linear_backward(x, weight, output_grad, with_bias, &s);
    Some((
        tensor_of(dx, vec![s.rows, s.inputs]),
        tensor_of(dw, vec![s.outputs, s.inputs]),
        db.map(|db| tensor_of(db, vec![s.outputs])),
    ))
}

/// [`CpuKernels::linear_layer`] by Burn's ops, for the dtypes the kernel does not take.
pub(super) fn linear_on_flex_by_burn(
    x: FlexTensor,
    weight: FlexTensor,
    bias: Option<FlexTensor>,
) -> FlexTensor {
    let matrix = |t: FlexTensor| Tensor::<Flex, 2>::from_primitive(TensorPrimitive::Float(t));
    let bias = bias.map(|b| Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(b)));
    linear_by_burn(matrix(x), matrix(weight), bias)
        .into_primitive()
        .tensor()
}

/// [`CpuKernels::linear_layer_grad`] by Burn's ops: the gradients of `Σ y · output_grad` through
/// [`linear_by_burn`] on `Autodiff<Flex>`.
pub(super) fn linear_grad_by_burn(
    x: FlexTensor,
    weight: FlexTensor,
    output_grad: FlexTensor,
    with_bias: bool,
) -> (FlexTensor, FlexTensor, Option<FlexTensor>) {
    let outputs = dims(&weight)[0];
    let dtype = weight.dtype();
    let tracked = |x: FlexTensor| {
        Tensor::<Autodiff<Flex>, 2>::from_inner(Tensor::from_primitive(TensorPrimitive::Float(x)))
            .require_grad()
    };
    let (x, weight) = (tracked(x), tracked(weight));
    let bias = with_bias.then(|| {
        Tensor::<Autodiff<Flex>, 1>::zeros([outputs], &Default::default())
            .cast(dtype)
            .require_grad()
    });
    let weights = Tensor::<Autodiff<Flex>, 2>::from_inner(Tensor::from_primitive(
        TensorPrimitive::Float(output_grad),
    ));
    let y = linear_by_burn(x.clone(), weight.clone(), bias.clone());
    let grads = (y * weights).sum().backward();
    let grad_of = |t: &Tensor<Autodiff<Flex>, 2>| match t.grad(&grads) {
        Some(grad) => grad.into_primitive().tensor(),
        None => unreachable!("x and W require a gradient"),
    };
    let bias_grad = bias.map(|b| match b.grad(&grads) {
        Some(grad) => grad.into_primitive().tensor(),
        None => unreachable!("the bias requires a gradient"),
    });
    (grad_of(&x), grad_of(&weight), bias_grad)
}

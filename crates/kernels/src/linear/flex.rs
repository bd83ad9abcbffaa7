//! [`LinearKernels`] on Flex: the kernels on Flex's buffers in f32 or f64, Burn's ops for
//! other float types and shapes the kernels do not take.

use burn::backend::{Autodiff, Flex};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Element, Tensor, TensorPrimitive};
use burn_flex::FlexTensor;

use super::{linear_backward, linear_by_burn, linear_forward, LinearKernels, LinearShape};
use crate::flex_buffers::{
    burn_tensor, contiguous, dims, flex_tensor, float_type, slice, tensor_of,
};
use crate::product::GemmFloat;

impl LinearKernels for Flex {
    fn linear_layer(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        let mut operands = vec![&x, &weight];
        operands.extend(bias.as_ref());
        let own = match float_type(&operands) {
            Some(DType::F32) => project::<f32>(&x, &weight, bias.as_ref()),
            Some(_) => project::<f64>(&x, &weight, bias.as_ref()),
            None => None,
        };
        own.unwrap_or_else(|| linear_on_flex_by_burn(x, weight, bias))
    }

    fn linear_layer_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        with_bias: bool,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        Option<FloatTensor<Self>>,
    ) {
        let operands = [&x, &weight, &output_grad];
        let own = match float_type(&operands) {
            Some(DType::F32) => project_grad::<f32>(operands, with_bias),
            Some(_) => project_grad::<f64>(operands, with_bias),
            None => None,
        };
        own.unwrap_or_else(|| linear_grad_by_burn(x, weight, output_grad, with_bias))
    }
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
fn project<T: GemmFloat + Element + bytemuck::Pod>(
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
fn project_grad<T: GemmFloat + Element + bytemuck::Pod>(
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

/// [`LinearKernels::linear_layer`] by Burn's ops, for the dtypes the kernel does not take.
fn linear_on_flex_by_burn(
    x: FlexTensor,
    weight: FlexTensor,
    bias: Option<FlexTensor>,
) -> FlexTensor {
    let bias = bias.map(burn_tensor::<1>);
    flex_tensor(linear_by_burn(burn_tensor(x), burn_tensor(weight), bias))
}

/// [`LinearKernels::linear_layer_grad`] by Burn's ops: the gradients of `Σ y · output_grad` through
/// [`linear_by_burn`] on `Autodiff<Flex>`.
fn linear_grad_by_burn(
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

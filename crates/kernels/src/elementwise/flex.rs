//! [`ElementwiseKernels`] on Flex: the kernels on Flex's buffers (GELU in f32, the pixel gate
//! in f32 or f64), Burn's ops for other float types and shapes the kernels do not take.

use burn::backend::Flex;
use burn::tensor::ops::{ActivationOps, FloatTensor};
use burn::tensor::{DType, Element};
use burn_flex::FlexTensor;

use super::pixel_gate::{self, GateGeometry};
use super::{channel_dot_by_burn, gate_blend_by_burn, gelu_forward, gelu_grad, ElementwiseKernels};
use crate::flex_buffers::{
    burn_tensor, contiguous, dims, flex_tensor, float_type, four, slice, tensor_of,
};

impl ElementwiseKernels for Flex {
    fn exact_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        if x.dtype() != DType::F32 {
            return <Flex as ActivationOps<Flex>>::gelu(x);
        }
        let x = contiguous(&x);
        tensor_of(gelu_forward(slice::<f32>(&x)), dims(&x))
    }

    fn exact_gelu_grad(x: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        if float_type(&[&x, &output_grad]) != Some(DType::F32) || dims(&x) != dims(&output_grad) {
            return <Flex as ActivationOps<Flex>>::gelu_backward(x, output_grad);
        }
        let [x, output_grad] = [&x, &output_grad].map(contiguous);
        let grad = gelu_grad(slice::<f32>(&x), slice::<f32>(&output_grad));
        tensor_of(grad, dims(&x))
    }

    fn channel_dot(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        gate_channel_dot(a, b)
    }

    fn scale_by_pixel(x: FloatTensor<Self>, s: FloatTensor<Self>) -> FloatTensor<Self> {
        gate_scale_by_pixel(x, s)
    }

    fn gate_blend(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        gate_blend_tensors(x, y, s)
    }

    fn gate_blend_grad(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        gate_blend_grad_tensors(x, y, s, output_grad)
    }
}

/// The `[N, C, H·W]` geometry of `x` and the float type shared with `others`, where `x` is 4-D,
/// each of `others` is `[N, C, H, W]` (`false`) or `[N, 1, H, W]` (`true`), and all are f32 or
/// f64; `None` otherwise.
fn gate_geometry(x: &FlexTensor, others: &[(&FlexTensor, bool)]) -> Option<(GateGeometry, DType)> {
    let [batch, channels, h, w] = four(x)?;
    let fits = others.iter().all(|(t, per_pixel)| {
        let c = if *per_pixel { 1 } else { channels };
        four(t) == Some([batch, c, h, w])
    });
    let mut tensors = vec![x];
    tensors.extend(others.iter().map(|(t, _)| *t));
    let dtype = float_type(&tensors)?;
    fits.then_some((
        GateGeometry {
            batch,
            channels,
            plane: h * w,
        },
        dtype,
    ))
}

/// [`pixel_gate::channel_dot`], or Burn's ops where the shapes or types do not fit.
fn gate_channel_dot(a: FlexTensor, b: FlexTensor) -> FlexTensor {
    let Some((g, dtype)) = gate_geometry(&a, &[(&b, false)]) else {
        return flex_tensor(channel_dot_by_burn(
            burn_tensor::<4>(a),
            burn_tensor::<4>(b),
        ));
    };
    let [a, b] = [&a, &b].map(contiguous);
    let shape = per_pixel_shape(&a);
    match dtype {
        DType::F32 => tensor_of(
            pixel_gate::channel_dot::<f32>(slice(&a), slice(&b), &g),
            shape,
        ),
        _ => tensor_of(
            pixel_gate::channel_dot::<f64>(slice(&a), slice(&b), &g),
            shape,
        ),
    }
}

/// `[N, 1, H, W]` of an `[N, C, H, W]` tensor.
fn per_pixel_shape(x: &FlexTensor) -> Vec<usize> {
    let mut shape = dims(x);
    if let Some(channels) = shape.get_mut(1) {
        *channels = 1;
    }
    shape
}

/// [`pixel_gate::scale_by_pixel`], or Burn's ops where the shapes or types do not fit.
fn gate_scale_by_pixel(x: FlexTensor, s: FlexTensor) -> FlexTensor {
    let Some((g, dtype)) = gate_geometry(&x, &[(&s, true)]) else {
        return flex_tensor(burn_tensor::<4>(x) * burn_tensor::<4>(s));
    };
    let [x, s] = [&x, &s].map(contiguous);
    let shape = dims(&x);
    match dtype {
        DType::F32 => tensor_of(
            pixel_gate::scale_by_pixel::<f32>(slice(&x), slice(&s), &g),
            shape,
        ),
        _ => tensor_of(
            pixel_gate::scale_by_pixel::<f64>(slice(&x), slice(&s), &g),
            shape,
        ),
    }
}

/// [`pixel_gate::gate_blend`], or Burn's ops where the shapes or types do not fit.
fn gate_blend_tensors(x: FlexTensor, y: FlexTensor, s: FlexTensor) -> FlexTensor {
    let Some((g, dtype)) = gate_geometry(&x, &[(&y, false), (&s, true)]) else {
        let [x, y, s] = [x, y, s].map(burn_tensor::<4>);
        return flex_tensor(gate_blend_by_burn(x, y, s));
    };
    let [x, y, s] = [&x, &y, &s].map(contiguous);
    let shape = dims(&x);
    match dtype {
        DType::F32 => tensor_of(
            pixel_gate::gate_blend::<f32>(slice(&x), slice(&y), slice(&s), &g),
            shape,
        ),
        _ => tensor_of(
            pixel_gate::gate_blend::<f64>(slice(&x), slice(&y), slice(&s), &g),
            shape,
        ),
    }
}

/// [`pixel_gate::gate_blend_grad`], or Burn's ops where the shapes or types do not fit.
fn gate_blend_grad_tensors(
    x: FlexTensor,
    y: FlexTensor,
    s: FlexTensor,
    output_grad: FlexTensor,
) -> [FlexTensor; 3] {
    let Some((g, dtype)) = gate_geometry(&x, &[(&y, false), (&s, true), (&output_grad, false)])
    else {
        let [x, y, s, dout] = [x, y, s, output_grad].map(burn_tensor::<4>);
        let dx = dout.clone() * (s.clone().neg() + 1.0);
        let dy = dout.clone() * s;
        let ds = (dout * (y - x)).sum_dim(1);
        return [dx, dy, ds].map(flex_tensor::<4>);
    };
    let [x, y, s, dout] = [&x, &y, &s, &output_grad].map(contiguous);
    let (shape, pixel_shape) = (dims(&x), per_pixel_shape(&x));
    fn tensors<T: Element>(
        grads: [Vec<T>; 3],
        shape: Vec<usize>,
        pixel: Vec<usize>,
    ) -> [FlexTensor; 3] {
        let [dx, dy, ds] = grads;
        [
            tensor_of(dx, shape.clone()),
            tensor_of(dy, shape),
            tensor_of(ds, pixel),
        ]
    }
    match dtype {
        DType::F32 => tensors(
            pixel_gate::gate_blend_grad::<f32>(slice(&x), slice(&y), slice(&s), slice(&dout), &g),
            shape,
            pixel_shape,
        ),
        _ => tensors(
            pixel_gate::gate_blend_grad::<f64>(slice(&x), slice(&y), slice(&s), slice(&dout), &g),
            shape,
            pixel_shape,
        ),
    }
}

//! [`ConvKernels`] on Flex: the kernels read Flex's contiguous buffers as slices, in f32 or
//! f64; other float types, and shapes the kernels do not take, go to Burn's op.

use burn::backend::Flex;
use burn::tensor::ops::{ActivationOps, ConvOptions, FloatTensor, FloatTensorOps, ModuleOps};
use burn::tensor::{DType, Element};
use burn_flex::FlexTensor;

use super::direct::{conv2d_forward_direct, direct_conv_is_fast_here, Epilogue};
use super::{conv2d_forward, conv2d_input_grad, conv2d_weight_grad, ConvGeometry, ConvKernels};
use crate::flex_buffers::{contiguous, dims, float_type, four, output_size, slice, tensor_of};
use crate::product::GemmFloat;

impl ConvKernels for Flex {
    fn conv2d_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let mut operands = vec![&x, &weight];
        operands.extend(bias.as_ref());
        let own = match float_type(&operands) {
            Some(DType::F32) => forward::<f32>(&x, &weight, bias.as_ref(), &options),
            Some(_) => forward::<f64>(&x, &weight, bias.as_ref(), &options),
            None => None,
        };
        own.unwrap_or_else(|| Flex::conv2d(x, weight, bias, options))
    }

    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let kernels: [GradientKernel; 2] = [input_grad::<f32>, input_grad::<f64>];
        gradient(kernels, [&x, &weight, &output_grad], &options)
            .unwrap_or_else(|| Flex::conv2d_x_backward(x, weight, output_grad, options))
    }

    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let kernels: [GradientKernel; 2] = [weight_grad::<f32>, weight_grad::<f64>];
        gradient(kernels, [&x, &weight, &output_grad], &options)
            .unwrap_or_else(|| Flex::conv2d_weight_backward(x, weight, output_grad, options))
    }
}

/// A gradient kernel of `(x, weight, output_grad)` in one float type.
type GradientKernel =
    fn(&FlexTensor, &FlexTensor, &FlexTensor, &ConvOptions<2>) -> Option<FlexTensor>;

/// The f32 or f64 kernel of `kernels`, as the tensors' float type says; `None` if they have
/// neither or differ.
fn gradient(
    [for_f32, for_f64]: [GradientKernel; 2],
    [x, weight, output_grad]: [&FlexTensor; 3],
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    match float_type(&[x, weight, output_grad])? {
        DType::F32 => for_f32(x, weight, output_grad, options),
        _ => for_f64(x, weight, output_grad, options),
    }
}

fn geometry(
    x: &FlexTensor,
    weight: &FlexTensor,
    out_size: Option<[usize; 2]>,
    options: &ConvOptions<2>,
) -> Option<ConvGeometry> {
    let ([batch, in_channels, in_h, in_w], [out_channels, _, kh, kw]) = (four(x)?, four(weight)?);
    let mut geometry = ConvGeometry {
        batch,
        in_channels,
        in_size: [in_h, in_w],
        out_channels,
        kernel: [kh, kw],
        out_size: [0, 0],
        stride: options.stride,
        padding: options.padding,
        dilation: options.dilation,
        groups: options.groups,
    };
    geometry.out_size = out_size.unwrap_or(geometry.expected_out_size());
    (geometry.expected_out_size() == geometry.out_size
        && options.groups > 0
        && in_channels.is_multiple_of(options.groups)
        && out_channels.is_multiple_of(options.groups))
    .then_some(geometry)
}

/// The forward by [`conv2d_forward`]; `None` where the shapes do not fit (then Burn's op runs
/// and reports them).
fn forward<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    forward_by(x, weight, bias, options, |x, w, b, g| {
        Some(conv2d_forward::<T>(x, w, b, g))
    })
}

/// A forward kernel on Flex's buffers: the geometry from the tensors' shapes, contiguous
/// slices in, the `[N, O, OH, OW]` output out; `None` where the shapes do not fit or `kernel`
/// declines.
fn forward_by<T: Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    options: &ConvOptions<2>,
    kernel: impl FnOnce(&[T], &[T], Option<&[T]>, &ConvGeometry) -> Option<Vec<T>>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, None, options)?;
    if bias.is_some_and(|bias| dims(bias) != [geometry.out_channels]) {
        return None;
    }
    let [x, weight] = [x, weight].map(contiguous);
    let bias = bias.map(contiguous);
    let values = kernel(
        slice::<T>(&x),
        slice::<T>(&weight),
        bias.as_ref().map(slice::<T>),
        &geometry,
    )?;
    let [oh, ow] = geometry.out_size;
    Some(tensor_of(
        values,
        vec![geometry.batch, geometry.out_channels, oh, ow],
    ))
}

/// The convolution of inference (no gradients follow), plus `residual` and then ReLU where
/// asked: in f32 by [`conv2d_forward_direct`] (both in its output write) where it applies and
/// is the faster kernel on this CPU, otherwise as [`ConvKernels::conv2d_forward`] followed by
/// Flex's add and ReLU.
///
/// Training keeps the unfolding kernel, whose sums gemm blocks as PyTorch's CPU GEMM path does:
/// the real-photo f32 step's boundary-head gradient (`pidnet_grads_parity`) amplifies the
/// forward's rounding, and with the direct kernel's blocking it measured 1.35× the test's bound
/// (`seghead_d.conv1.weight`), against 0.04× with the unfolding kernel.
pub(super) fn conv2d_inference(
    x: FloatTensor<Flex>,
    weight: FloatTensor<Flex>,
    bias: Option<FloatTensor<Flex>>,
    options: ConvOptions<2>,
    residual: Option<FloatTensor<Flex>>,
    relu: bool,
) -> FloatTensor<Flex> {
    let mut operands = vec![&x, &weight];
    operands.extend(bias.as_ref());
    operands.extend(residual.as_ref());
    let direct = match float_type(&operands) {
        Some(DType::F32) => forward_direct(
            &x,
            &weight,
            bias.as_ref(),
            &options,
            residual.as_ref(),
            relu,
        ),
        _ => None,
    };
    if let Some(out) = direct {
        return out;
    }
    let out = Flex::conv2d_forward(x, weight, bias, options);
    let out = match residual {
        Some(residual) => Flex::float_add(out, residual),
        None => out,
    };
    if relu {
        Flex::relu(out)
    } else {
        out
    }
}

/// The f32 forward by [`conv2d_forward_direct`], the residual and ReLU in its output write,
/// where it applies and is the faster kernel on this CPU; `None` elsewhere (and where the
/// residual is not of the output's shape: Burn's add broadcasts that).
fn forward_direct(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    options: &ConvOptions<2>,
    residual: Option<&FlexTensor>,
    relu: bool,
) -> Option<FlexTensor> {
    if !direct_conv_is_fast_here() {
        return None;
    }
    let residual = residual.map(contiguous);
    forward_by(x, weight, bias, options, |x, w, b, g| {
        let residual = match &residual {
            Some(residual) => {
                let [oh, ow] = g.out_size;
                if dims(residual) != [g.batch, g.out_channels, oh, ow] {
                    return None;
                }
                Some(slice::<f32>(residual))
            }
            None => None,
        };
        conv2d_forward_direct(x, w, b, g, Epilogue { residual, relu })
    })
}

/// The input gradient by [`conv2d_input_grad`]; `None` where the shapes do not fit (then
/// Burn's op runs and reports them).
fn input_grad<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, Some(output_size(output_grad)?), options)?;
    let [weight, output_grad] = [weight, output_grad].map(contiguous);
    let values = conv2d_input_grad(slice::<T>(&weight), slice::<T>(&output_grad), &geometry);
    Some(tensor_of(values, dims(x)))
}

/// The weight gradient by [`conv2d_weight_grad`]; `None` where the shapes are not those of a
/// 2-D convolution with `options` (then Burn's op runs).
fn weight_grad<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, Some(output_size(output_grad)?), options)?;
    let [x, output_grad] = [x, output_grad].map(contiguous);
    let values = conv2d_weight_grad(slice::<T>(&x), slice::<T>(&output_grad), &geometry);
    Some(tensor_of(values, dims(weight)))
}

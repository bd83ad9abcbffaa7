//! [`CpuKernels`] on Flex: the kernels read Flex's contiguous buffers as slices, in f32 or
//! f64; other float types go to Burn's op.

use burn::backend::Flex;
use burn::tensor::ops::{ConvOptions, FloatTensor, InterpolateMode, InterpolateOptions, ModuleOps};
use burn::tensor::{DType, Element, TensorData};
use burn_flex::FlexTensor;

use super::bilinear::{bilinear_forward, bilinear_input_grad, BilinearFloat, BilinearGeometry};
use super::conv::{conv2d_forward, conv2d_input_grad, conv2d_weight_grad, ConvGeometry, GemmFloat};
use super::CpuKernels;

impl CpuKernels for Flex {
    fn conv2d_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&x, &weight]) {
            Some(DType::F32) => forward::<f32>(&x, &weight, &options),
            Some(_) => forward::<f64>(&x, &weight, &options),
            None => None,
        };
        own.unwrap_or_else(|| Flex::conv2d(x, weight, None, options))
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

    fn bilinear_forward(
        x: FloatTensor<Self>,
        output_size: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&x]) {
            Some(DType::F32) => resize::<f32>(&x, output_size, align_corners),
            Some(_) => resize::<f64>(&x, output_size, align_corners),
            None => None,
        };
        own.unwrap_or_else(|| Flex::interpolate(x, output_size, bilinear(align_corners)))
    }

    fn bilinear_input_grad(
        input_shape: [usize; 4],
        output_grad: FloatTensor<Self>,
        align_corners: bool,
    ) -> FloatTensor<Self> {
        let own = match float_type(&[&output_grad]) {
            Some(DType::F32) => resize_grad::<f32>(input_shape, &output_grad, align_corners),
            Some(_) => resize_grad::<f64>(input_shape, &output_grad, align_corners),
            None => None,
        };
        own.unwrap_or_else(|| {
            // Burn's backward reads only the input's shape and dtype.
            let x = FlexTensor::zeros(input_shape.to_vec().into(), output_grad.dtype());
            let output_size = output_size(&output_grad).unwrap_or([0, 0]);
            Flex::interpolate_backward(x, output_grad, output_size, bilinear(align_corners))
        })
    }
}

fn bilinear(align_corners: bool) -> InterpolateOptions {
    InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(align_corners)
}

/// The geometry of resizing `[N, C, H, W]` to `output_size`; `None` for an empty input (then
/// Burn's op runs and reports it).
fn resize_geometry(
    [batch, channels, in_h, in_w]: [usize; 4],
    output_size: [usize; 2],
    align_corners: bool,
) -> Option<BilinearGeometry> {
    (in_h > 0 && in_w > 0).then_some(BilinearGeometry {
        planes: batch * channels,
        in_size: [in_h, in_w],
        out_size: output_size,
        align_corners,
    })
}

/// The resize by [`bilinear_forward`]; `None` where `x` is not 4-D or empty.
fn resize<T: BilinearFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    output_size: [usize; 2],
    align_corners: bool,
) -> Option<FlexTensor> {
    let shape: [usize; 4] = dims(x).try_into().ok()?;
    let geometry = resize_geometry(shape, output_size, align_corners)?;
    let x = contiguous(x);
    let values = bilinear_forward(slice::<T>(&x), &geometry);
    let [oh, ow] = output_size;
    Some(tensor_of(values, vec![shape[0], shape[1], oh, ow]))
}

/// The input gradient by [`bilinear_input_grad`]; `None` where the shapes do not fit.
fn resize_grad<T: BilinearFloat + Element + bytemuck::Pod>(
    input_shape: [usize; 4],
    output_grad: &FlexTensor,
    align_corners: bool,
) -> Option<FlexTensor> {
    let [n, c, oh, ow]: [usize; 4] = dims(output_grad).try_into().ok()?;
    if [n, c] != [input_shape[0], input_shape[1]] {
        return None;
    }
    let geometry = resize_geometry(input_shape, [oh, ow], align_corners)?;
    let output_grad = contiguous(output_grad);
    let values = bilinear_input_grad(slice::<T>(&output_grad), &geometry);
    Some(tensor_of(values, input_shape.to_vec()))
}

/// F32 or F64 when all `tensors` have it (what the kernels compute in); `None` otherwise.
fn float_type(tensors: &[&FlexTensor]) -> Option<DType> {
    let dtype = tensors.first()?.dtype();
    (matches!(dtype, DType::F32 | DType::F64) && tensors.iter().all(|t| t.dtype() == dtype))
        .then_some(dtype)
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

/// `tensor` with a row-major buffer (no copy if it already had one).
fn contiguous(tensor: &FlexTensor) -> FlexTensor {
    tensor.to_contiguous()
}

/// The buffer of a contiguous tensor as `T`s (the caller checked the dtype; a mismatch gives
/// an empty slice, which the kernel's length checks report).
fn slice<T: Element + bytemuck::Pod>(tensor: &FlexTensor) -> &[T] {
    tensor.as_slice::<T>().unwrap_or(&[])
}

fn tensor_of<T: Element>(values: Vec<T>, shape: Vec<usize>) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

fn dims(tensor: &FlexTensor) -> Vec<usize> {
    tensor.layout().shape().to_vec()
}

/// The geometry of `conv2d(x, weight)` with `options` giving an output of `out_size`; `None`
/// where the tensors are not 4-D.
fn geometry(
    x: &FlexTensor,
    weight: &FlexTensor,
    out_size: Option<[usize; 2]>,
    options: &ConvOptions<2>,
) -> Option<ConvGeometry> {
    let four = |t: &FlexTensor| -> Option<[usize; 4]> { dims(t).try_into().ok() };
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

/// The convolution by [`conv2d_forward`]; `None` where the shapes do not fit (then Burn's op
/// runs and reports them).
fn forward<T: GemmFloat + Element + bytemuck::Pod>(
    x: &FlexTensor,
    weight: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, None, options)?;
    let [x, weight] = [x, weight].map(contiguous);
    let values = conv2d_forward(slice::<T>(&x), slice::<T>(&weight), &geometry);
    let [oh, ow] = geometry.out_size;
    Some(tensor_of(
        values,
        vec![geometry.batch, geometry.out_channels, oh, ow],
    ))
}

/// The input gradient by [`conv2d_input_grad`] for pointwise convolutions; `None` for the
/// others (and where the shapes do not fit), where Flex's transposed convolution is as fast
/// (`cargo xtask bench-kernels`: 0.84–1.03× on PIDNet's 3×3 layers, 1.3–6.6× on 1×1).
fn input_grad<T: GemmFloat + Element + bytemuck::Pod + std::ops::AddAssign>(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let geometry = geometry(x, weight, Some(output_size(output_grad)?), options)?;
    if !geometry.is_pointwise() {
        return None;
    }
    let [weight, output_grad] = [weight, output_grad].map(contiguous);
    let values = conv2d_input_grad(slice::<T>(&weight), slice::<T>(&output_grad), &geometry);
    Some(tensor_of(values, dims(x)))
}

/// `[H, W]` of an `[N, C, H, W]` tensor.
fn output_size(tensor: &FlexTensor) -> Option<[usize; 2]> {
    match dims(tensor).as_slice() {
        [_, _, h, w] => Some([*h, *w]),
        _ => None,
    }
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

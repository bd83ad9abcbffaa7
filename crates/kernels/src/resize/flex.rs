//! [`ResizeKernels`] on Flex: the kernels on Flex's buffers in f32 or f64, Burn's op for other
//! float types and for empty inputs.

use burn::backend::Flex;
use burn::tensor::ops::{FloatTensor, InterpolateMode, InterpolateOptions, ModuleOps};
use burn::tensor::{DType, Element};
use burn_flex::FlexTensor;

use super::{
    bilinear_forward, bilinear_input_grad, BilinearFloat, BilinearGeometry, ResizeKernels,
};
use crate::flex_buffers::{contiguous, dims, float_type, output_size, slice, tensor_of};

impl ResizeKernels for Flex {
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

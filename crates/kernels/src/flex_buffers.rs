//! The glue between Flex's tensors and the kernels' plain slices, shared by every family's
//! `flex.rs`: the float type the kernels run in, row-major buffers in and out, shapes.

use burn::backend::Flex;
use burn::tensor::{DType, Element, Tensor, TensorData, TensorPrimitive};
use burn_flex::FlexTensor;

/// F32 or F64 when all `tensors` have it (what the kernels compute in); `None` otherwise.
pub(crate) fn float_type(tensors: &[&FlexTensor]) -> Option<DType> {
    let dtype = tensors.first()?.dtype();
    (matches!(dtype, DType::F32 | DType::F64) && tensors.iter().all(|t| t.dtype() == dtype))
        .then_some(dtype)
}

/// `tensor` with a row-major buffer (no copy if it already had one).
pub(crate) fn contiguous(tensor: &FlexTensor) -> FlexTensor {
    tensor.to_contiguous()
}

/// The buffer of a contiguous tensor as `T`s (the caller checked the dtype; a mismatch gives
/// an empty slice, which the kernel's length checks report).
pub(crate) fn slice<T: Element + bytemuck::Pod>(tensor: &FlexTensor) -> &[T] {
    tensor.as_slice::<T>().unwrap_or(&[])
}

/// A Flex tensor of `values` in row-major order.
pub(crate) fn tensor_of<T: Element>(values: Vec<T>, shape: Vec<usize>) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

pub(crate) fn dims(tensor: &FlexTensor) -> Vec<usize> {
    tensor.layout().shape().to_vec()
}

/// The shape of a 4-D tensor; `None` for other ranks.
pub(crate) fn four(tensor: &FlexTensor) -> Option<[usize; 4]> {
    dims(tensor).try_into().ok()
}

/// `[H, W]` of an `[N, C, H, W]` tensor.
pub(crate) fn output_size(tensor: &FlexTensor) -> Option<[usize; 2]> {
    match dims(tensor).as_slice() {
        [_, _, h, w] => Some([*h, *w]),
        _ => None,
    }
}

/// Flex's tensor as one of Burn's, for the reference ops.
pub(crate) fn burn_tensor<const D: usize>(tensor: FlexTensor) -> Tensor<Flex, D> {
    Tensor::from_primitive(TensorPrimitive::Float(tensor))
}

/// The inverse of [`burn_tensor`].
pub(crate) fn flex_tensor<const D: usize>(tensor: Tensor<Flex, D>) -> FlexTensor {
    tensor.into_primitive().tensor()
}

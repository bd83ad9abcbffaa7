//! The dispatch rule every family follows: who computes an op on tensors of a backend `B` in
//! some dtype, and the re-typing between `B` and the concrete Flex types once that is decided.
//!
//! Why the dispatch compares types instead of asking for a `B: CpuKernels` bound: the models,
//! losses and trainers are generic over `B: Backend` in some 300 places, and the choice is
//! between two concrete types. The `TypeId` comparison is resolved at compile time.

use std::any::{Any, TypeId};

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Tensor, TensorPrimitive};

/// The backend CPU training runs on.
pub(crate) type CpuTraining = Autodiff<Flex>;

/// Who computes an operation on tensors of `B` in some dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Burn's op: CUDA, wgpu, half precision, any other backend.
    Burn,
    /// Our kernels inside autodiff operations of our own: CPU training in f32/f64.
    OwnTraining,
    /// Our forward kernels directly: CPU inference (plain `Flex`) in f32/f64.
    OwnInference,
}

/// The route of an op on `B` in `dtype`.
pub(crate) fn route<B: Backend>(dtype: DType) -> Route {
    if !matches!(dtype, DType::F32 | DType::F64) {
        Route::Burn
    } else if TypeId::of::<B>() == TypeId::of::<CpuTraining>() {
        Route::OwnTraining
    } else if TypeId::of::<B>() == TypeId::of::<Flex>() {
        Route::OwnInference
    } else {
        Route::Burn
    }
}

/// Whether `B` is Flex, plain (inference) or under autodiff (training), in any dtype: Flex has
/// every op's backward, half precision included, where the GPU backends lack some.
pub(crate) fn is_flex<B: Backend>() -> bool {
    TypeId::of::<B>() == TypeId::of::<Flex>() || TypeId::of::<B>() == TypeId::of::<CpuTraining>()
}

/// The float primitive of a tensor of `B` that the route established is `Flex`.
pub(crate) fn flex_primitive<B: Backend, const D: usize>(
    tensor: Tensor<B, D>,
) -> FloatTensor<Flex> {
    same_backend::<B, Flex, D>(tensor).into_primitive().tensor()
}

/// A Flex result as a tensor of `B` (the caller's route established `B` is `Flex`); the inverse
/// of [`flex_primitive`].
pub(crate) fn from_flex<B: Backend, const D: usize>(tensor: FloatTensor<Flex>) -> Tensor<B, D> {
    same_backend(Tensor::<Flex, D>::from_primitive(TensorPrimitive::Float(
        tensor,
    )))
}

/// Re-types a tensor between two names of the same backend (`From` and `To` are one type; the
/// caller compared their `TypeId`s).
pub(crate) fn same_backend<From: Backend, To: Backend, const D: usize>(
    tensor: Tensor<From, D>,
) -> Tensor<To, D> {
    match (Box::new(tensor) as Box<dyn Any>).downcast::<Tensor<To, D>>() {
        Ok(tensor) => *tensor,
        Err(_) => unreachable!("same_backend is called only when the backend types are equal"),
    }
}

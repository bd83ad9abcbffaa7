//! Loss precision and host <-> device helpers.
//!
//! Losses run in f32 even when the network runs in f16/bf16: the softmax of 19 logits and the
//! sums over millions of pixels lose too much in half precision. f64 inputs stay f64 so that
//! gradients can be checked against finite differences tightly.

use burn::tensor::{backend::Backend, DType, FloatDType, Int, Tensor, TensorData};

/// The dtype a loss computes in for inputs of `dtype`: f64 stays f64, everything else is f32.
pub(crate) fn loss_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F64 => DType::F64,
        _ => DType::F32,
    }
}

/// Casts a float tensor to the loss precision (differentiable; a no-op when already there).
pub(crate) fn to_loss_precision<B: Backend, const D: usize>(t: Tensor<B, D>) -> Tensor<B, D> {
    match loss_dtype(t.dtype()) {
        DType::F64 => t.cast(FloatDType::F64),
        _ => t.cast(FloatDType::F32),
    }
}

/// Uploads host values as a float tensor of `dtype` (no gradient).
pub(crate) fn host_float<B: Backend, const D: usize>(
    values: Vec<f32>,
    shape: [usize; D],
    device: &B::Device,
    dtype: DType,
) -> Tensor<B, D> {
    let data = TensorData::new(values, shape).convert_dtype(dtype);
    Tensor::from_data(data, (device, dtype))
}

/// Uploads per-element coefficients computed in f64 as a tensor of `dtype` (the loss dtype),
/// rounding each once: an f64 loss keeps them in f64, so that it reproduces an f64 reference
/// to ~1e-15 rather than to the ~1e-8 of f32-rounded coefficients.
pub(crate) fn host_coefficients<B: Backend, const D: usize>(
    values: impl Iterator<Item = f64>,
    shape: [usize; D],
    device: &B::Device,
    dtype: DType,
) -> Tensor<B, D> {
    let data = if dtype == DType::F64 {
        TensorData::new(values.collect::<Vec<f64>>(), shape)
    } else {
        TensorData::new(values.map(|v| v as f32).collect::<Vec<f32>>(), shape).convert_dtype(dtype)
    };
    Tensor::from_data(data, (device, dtype))
}

/// Uploads host values as an integer tensor.
pub(crate) fn host_int<B: Backend, const D: usize>(
    values: Vec<i64>,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D, Int> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Downloads a float tensor as f32 values (detached; one device sync).
pub(crate) fn download_f32<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.detach()
        .into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .expect("TensorData::convert::<f32> yields f32 data")
}

/// Downloads an integer tensor as i64 values (one device sync).
pub(crate) fn download_i64<B: Backend, const D: usize>(t: Tensor<B, D, Int>) -> Vec<i64> {
    t.into_data()
        .convert::<i64>()
        .into_vec::<i64>()
        .expect("TensorData::convert::<i64> yields i64 data")
}

/// A scalar zero that stays connected to `t`'s graph, so `backward` yields a zero gradient
/// (rather than no gradient at all) when a batch has nothing to learn from.
pub(crate) fn connected_zero<B: Backend, const D: usize>(t: Tensor<B, D>) -> Tensor<B, 1> {
    t.sum().mul_scalar(0.0)
}

/// Sum of all elements accumulated in f64, returned in the input's dtype -> `[1]`
/// (differentiable).
///
/// Flex sums f32 in a few SIMD lanes sequentially, which loses ~1e-4 relative over the 65k
/// pixels of a 128×256 batch (and more over 12×1024×1024); PyTorch's cascade sum does not.
/// The per-pixel tensors reduced here are `[N, H, W]`, so the f64 copy is cheap.
pub(crate) fn accurate_sum<B: Backend, const D: usize>(t: Tensor<B, D>) -> Tensor<B, 1> {
    let dtype = t.dtype();
    if dtype == DType::F64 {
        return t.sum();
    }
    t.cast(FloatDType::F64).sum().cast(dtype)
}

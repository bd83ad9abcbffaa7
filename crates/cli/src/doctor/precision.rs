//! Half precision on a device, the way the trainer uses it: an f32 input cast to f16/bf16, a
//! matmul in that dtype, the result cast back to f32, and a backward pass whose gradient must
//! arrive in f32 at the f32 master tensor.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, FloatDType, Tensor, TensorData};
use serde::Serialize;

use super::reference::{self, max_abs, max_abs_diff};

/// The result of one half-precision dtype on one device.
#[derive(Debug, Clone, Serialize)]
pub struct HalfPrecisionCheck {
    /// `f16` or `bf16`.
    pub dtype: &'static str,
    /// The matmul ran and came back in the requested dtype.
    pub output_in_dtype: bool,
    /// The gradient reached the f32 master tensor as f32.
    pub gradient_is_f32: bool,
    /// `max |half - f32| / max |f32|` of the matmul result.
    pub relative_error: f32,
    /// The bound for this dtype (a few units of its rounding error at this depth).
    pub tolerance: f32,
}

impl HalfPrecisionCheck {
    pub fn passed(&self) -> bool {
        self.output_in_dtype && self.gradient_is_f32 && self.relative_error <= self.tolerance
    }
}

fn name_and_tolerance(dtype: FloatDType) -> (&'static str, f32) {
    match dtype {
        // f16 keeps 11 significant bits, bf16 8: for a 96-term dot product of values in
        // [-1, 1] measured errors are ~5e-4 and ~4e-3.
        FloatDType::F16 => ("f16", 1e-2),
        FloatDType::BF16 => ("bf16", 5e-2),
        _ => ("f32", 1e-5),
    }
}

/// Cast + matmul + backward in `dtype` on `device`.
pub fn check_half_precision<B: AutodiffBackend>(
    dtype: FloatDType,
    device: &B::Device,
) -> Result<HalfPrecisionCheck, String> {
    let (name, tolerance) = name_and_tolerance(dtype);
    // Not tried where the backend says no: wgpu's shader compiler panics on bf16 in its own
    // thread, out of reach of the caller's guard.
    if !B::supports_dtype(device, DType::from(dtype)) {
        return Err(format!(
            "the backend does not compute in {name} on this device"
        ));
    }
    let (m, k, n) = (64, 96, 48);
    let a = reference::pseudo_random(m * k, 51);
    let b = reference::pseudo_random(k * n, 52);
    let expected = reference::matmul(&a, &b, [1, m, k, n]);

    let a = Tensor::<B, 2>::from_data(TensorData::new(a, [m, k]), device).require_grad();
    let b = Tensor::<B, 2>::from_data(TensorData::new(b, [k, n]), device);
    let product = a.clone().cast(dtype).matmul(b.cast(dtype));
    let output_in_dtype = product.dtype() == DType::from(dtype);
    let product = product.cast(FloatDType::F32);
    let grads = product.clone().sum().backward();
    let gradient_is_f32 = a.grad(&grads).is_some_and(|g| g.dtype() == DType::F32);
    let got = product
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .map_err(|e| format!("cannot read the {name} result back: {e:?}"))?;
    Ok(HalfPrecisionCheck {
        dtype: name,
        output_in_dtype,
        gradient_is_f32,
        relative_error: max_abs_diff(&got, &expected) / max_abs(&expected).max(f32::MIN_POSITIVE),
        tolerance,
    })
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};

    use super::*;

    #[test]
    fn f16_and_bf16_work_on_flex_with_their_expected_error() {
        for (dtype, low, high) in [
            (FloatDType::F16, 1e-5, 5e-3),
            (FloatDType::BF16, 1e-4, 3e-2),
        ] {
            let check = check_half_precision::<Autodiff<Flex>>(dtype, &Default::default()).unwrap();
            assert!(check.passed(), "{check:?}");
            // A "half" result that is exactly the f32 one was never computed in half.
            assert!(
                check.relative_error > low && check.relative_error < high,
                "{check:?}"
            );
        }
    }
}

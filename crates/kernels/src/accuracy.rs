//! The accuracy rule of the kernels' tests, public so that the models' tests of the layers
//! built on the kernels hold them to the same rule.

/// `‖a − b‖ / ‖b‖`; infinite when either holds a NaN or an infinity, so that every bound fails
/// on it (a NaN error would be dropped by `f64::max` and pass a bound taken from it).
///
/// # Panics
/// If the lengths differ.
pub fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "compared tensors differ in length");
    if !a.iter().chain(b).all(|v| v.is_finite()) {
        return f64::INFINITY;
    }
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// A fixed pseudo-random sequence in [-1, 1) (xorshift), for the kernels' tests.
pub fn test_values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// The bound on one result of a kernel against Burn's ops: ours in f64 within 1e-13 of the
/// exact one (Burn's ops in f64), ours in f32 within 3× the f32 error of Burn's ops (both
/// against the exact).
///
/// # Panics
/// When a bound is not met (or a result holds a NaN); `what` names the result.
pub fn assert_as_accurate_as_burn(what: &str, [exact, ours64, ours32, burn32]: [&[f64]; 4]) {
    let e64 = rel_l2(ours64, exact);
    assert!(e64 <= 1e-13, "{what} f64: {e64:e}");
    let (ours, burn) = (rel_l2(ours32, exact), rel_l2(burn32, exact));
    assert!(
        ours <= 3.0 * burn.max(1e-7),
        "{what} f32: ours {ours:e}, Burn's {burn:e}"
    );
}

/// The values of a tensor in f64 (empty if they cannot be read as f64).
pub fn tensor_values<B: burn::tensor::backend::Backend, const D: usize>(
    tensor: burn::tensor::Tensor<B, D>,
) -> Vec<f64> {
    tensor
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .unwrap_or_default()
}

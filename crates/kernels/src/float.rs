//! The float types the kernels compute in, f32 and f64: the kernels are generic over them and
//! every sum runs in f64, so the f32 results are deterministic and at least as accurate as
//! Burn's composed f32 ops.

/// The float types the kernels compute in (their sums run in f64).
pub trait NormFloat: Copy + Default + Send + Sync + 'static {
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
}

impl NormFloat for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

impl NormFloat for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(value: f64) -> Self {
        value
    }
}

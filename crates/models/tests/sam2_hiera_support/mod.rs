//! Shared helpers of the SAM 2.1 (Hiera) parity tests: the reduced fixture model and checked
//! comparisons.
#![allow(dead_code)]

use burn::tensor::{backend::Backend, DType, Tensor};
use segburn_models::fixtures::{fixtures_dir, tensor_values, Fixture};
use segburn_models::sam2::{import, Sam2, Sam2Config};
use segburn_models::weights::cast_floats;

pub fn fixture(name: &str) -> Fixture {
    Fixture::load(&format!("sam2_hiera/{name}"))
        .unwrap_or_else(|e| panic!("fixture sam2_hiera/{name}: {e}"))
}

/// The reduced SAM 2.1 model of the fixtures (`reference/sam2-hiera-spec.md` §8).
pub fn reduced_config() -> Sam2Config {
    segburn_models::fixtures::sam2_hiera_config()
}

/// The reduced model with the fixture weights (`model.safetensors`, loaded strictly), in
/// `dtype`.
pub fn load_model<B: Backend>(device: &B::Device, dtype: DType) -> Sam2<B> {
    let config = reduced_config();
    config.check().expect("the reduced config is valid");
    let path = fixtures_dir().join("sam2_hiera").join("model.safetensors");
    let (model, report) = import::load_official(config.init::<B>(device), &path, true)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        report.missing.is_empty() && report.unexpected.is_empty(),
        "{report}"
    );
    cast_floats(model, dtype)
}

/// A fixture tensor in `dtype`.
pub fn input<B: Backend, const D: usize>(
    f: &Fixture,
    key: &str,
    device: &B::Device,
    dtype: DType,
) -> Tensor<B, D> {
    let t: Tensor<B, D> = f.float_f64(key, device).unwrap_or_else(|e| panic!("{e}"));
    t.cast(dtype)
}

/// Max |ours − reference| over max |reference| against a fixture key (shapes checked; any
/// non-finite value of ours is a failure).
pub fn errors<B: Backend, const D: usize>(
    ours: Tensor<B, D>,
    f: &Fixture,
    key: &str,
) -> (f64, f64) {
    let reference = f.data(key).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ours.dims().to_vec(),
        reference.shape.to_vec(),
        "shape of `{key}` in {}",
        f.path().display()
    );
    let ours = tensor_values(ours);
    assert!(
        ours.iter().all(|v| v.is_finite()),
        "`{key}`: non-finite values"
    );
    let reference = f.values_f64(key).expect(key);
    // NaN or infinity on either side is an infinite error.
    let error = segburn_models::fixtures::max_abs_diff(&ours, &reference);
    let scale = segburn_models::fixtures::max_abs(&reference);
    (error, error / scale.max(f64::MIN_POSITIVE))
}

/// Asserts max |ours − reference| ≤ `atol`, printing the error.
pub fn assert_close<B: Backend, const D: usize>(
    ours: Tensor<B, D>,
    f: &Fixture,
    key: &str,
    atol: f64,
) {
    let (abs, rel) = errors(ours, f, key);
    println!("{key}: max abs {abs:.3e} (relative to max |ref| {rel:.3e}), atol {atol:.0e}");
    assert!(abs <= atol, "{key}: max abs error {abs:.3e} > {atol:.0e}");
}

/// Asserts max |ours − reference| / max |reference| ≤ `rtol`, printing the error.
pub fn assert_close_relative<B: Backend, const D: usize>(
    ours: Tensor<B, D>,
    f: &Fixture,
    key: &str,
    rtol: f64,
) {
    let (abs, rel) = errors(ours, f, key);
    println!("{key}: max abs {abs:.3e}, relative {rel:.3e}, rtol {rtol:.0e}");
    assert!(rel <= rtol, "{key}: relative error {rel:.3e} > {rtol:.0e}");
}

/// `key → shape` of an official key listing.
pub fn listing(path: &std::path::Path) -> std::collections::BTreeMap<String, Vec<usize>> {
    segburn_models::fixtures::key_listing(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

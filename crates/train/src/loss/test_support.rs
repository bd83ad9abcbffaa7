//! Shared helpers of the loss tests: backends, fixture access, scalar comparisons.

use std::sync::OnceLock;

use burn::backend::{flex::FlexDevice, Autodiff, Flex};
use burn::tensor::{backend::Backend, Int, Tensor};
use segburn_models::fixtures::Fixture;

pub type B = Flex;
pub type AD = Autodiff<Flex>;

pub fn device() -> FlexDevice {
    FlexDevice
}

pub fn losses_fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture::load("losses/losses.safetensors").expect("losses fixture"))
}

pub fn fullloss_fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        Fixture::load("pidnet_s/train/fullloss.safetensors").expect("full-loss fixture")
    })
}

pub fn fx_float<const D: usize>(fx: &Fixture, key: &str) -> Tensor<B, D> {
    fx_float_on::<B, D>(fx, key)
}

pub fn fx_float_on<BK: Backend<Device = FlexDevice>, const D: usize>(
    fx: &Fixture,
    key: &str,
) -> Tensor<BK, D> {
    fx.float::<BK, D>(key, &device()).expect("fixture key")
}

pub fn fx_int(fx: &Fixture, key: &str) -> Tensor<B, 3, Int> {
    fx_int_on::<B>(fx, key)
}

/// A label map (stored as u8) as an int tensor.
pub fn fx_int_on<BK: Backend<Device = FlexDevice>>(fx: &Fixture, key: &str) -> Tensor<BK, 3, Int> {
    Tensor::from_data(
        fx.data(key).expect("fixture key").convert::<i64>(),
        &device(),
    )
}

pub fn class_weights(fx: &Fixture) -> Vec<f32> {
    fx.values_f64("class_weights")
        .expect("class_weights")
        .into_iter()
        .map(|w| w as f32)
        .collect()
}

/// One `(min_kept, thresh, weighted)` fixture variant, parsed from a key such as
/// `ohem.mk1000_t0.7_w`.
pub struct Variant {
    pub key: String,
    pub min_kept: usize,
    pub thresh: f32,
    pub weighted: bool,
}

/// Every key starting with `prefix`, parsed. Fails if there is none, so a renamed key cannot
/// silently skip the test.
pub fn variants(fx: &Fixture, prefix: &str) -> Vec<Variant> {
    let mut out: Vec<Variant> = fx
        .tensors()
        .keys()
        .filter_map(|key| key.strip_prefix(prefix).map(|tag| (key, tag)))
        .map(|(key, tag)| {
            let parts: Vec<&str> = tag.split('_').collect();
            assert_eq!(parts.len(), 3, "unexpected variant tag {tag}");
            Variant {
                key: key.clone(),
                min_kept: parts[0].trim_start_matches("mk").parse().expect("min_kept"),
                thresh: parts[1].trim_start_matches('t').parse().expect("thresh"),
                weighted: parts[2] == "w",
            }
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(out.len(), 5, "expected 5 `{prefix}` variants");
    out
}

/// `(key, weighted)` of every variant with `prefix`.
pub fn fixture_variants(fx: &Fixture, prefix: &str) -> Vec<(String, bool)> {
    variants(fx, prefix)
        .into_iter()
        .map(|v| (v.key, v.weighted))
        .collect()
}

pub fn scalar<BK: Backend>(t: Tensor<BK, 1>) -> f64 {
    assert_eq!(t.dims(), [1], "a scalar loss has shape [1]");
    t.into_data().convert::<f64>().to_vec::<f64>().unwrap()[0]
}

/// Asserts `|got − want| / |want| ≤ tol` for the scalar fixture `key`, and prints the measured
/// error (`cargo test -- --nocapture` lists every parity number).
pub fn assert_scalar<BK: Backend>(t: Tensor<BK, 1>, fx: &Fixture, key: &str, tol: f64) {
    let want = fx.values_f64(key).expect("fixture key")[0];
    assert_close(scalar(t), want, tol, key);
}

pub fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    let rel = (got - want).abs() / want.abs().max(f64::MIN_POSITIVE);
    println!("parity {what}: got {got:.9}, want {want:.9}, rel {rel:.2e}");
    assert!(
        rel <= tol,
        "{what}: got {got}, want {want}, rel {rel:e} > {tol:e}"
    );
}

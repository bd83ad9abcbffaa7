//! Shared helpers of the SAM 2.1 video parity tests (`tests/fixtures/sam2_video/`): the reduced
//! video model, the fixture's compact inputs (f16 values, uint8 codes on a 1/8 grid) and the
//! official f32-vs-f64 spreads of `manifest.json`, from which the tolerances are set.
#![allow(dead_code)]

use burn::tensor::{backend::Backend, DType, Tensor, TensorData};
use segburn_models::fixtures::{fixture_path, fixtures_dir, sam2_video_config, Fixture};
use segburn_models::sam2::{import, Sam2};
use segburn_models::weights::cast_floats;

/// `sam2_video/<name>`.
pub fn fixture(name: &str) -> Fixture {
    Fixture::load(&format!("sam2_video/{name}"))
        .unwrap_or_else(|e| panic!("fixture sam2_video/{name}: {e}"))
}

/// The reduced video model with the weights of `weights` (a fixture path), loaded strictly,
/// in `dtype`.
pub fn video_model<B: Backend>(weights: &str, device: &B::Device, dtype: DType) -> Sam2<B> {
    let config = sam2_video_config();
    config.check().expect("the reduced video config is valid");
    let path = fixture_path(weights).unwrap_or_else(|e| panic!("{e}"));
    let (model, report) = import::load_official(config.init::<B>(device), &path, true)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(report.not_used.is_empty(), "{report}");
    cast_floats(model, dtype)
}

/// A `*_q8` input: value = (q − 128) / 8, exact in any float type.
pub fn q8_input<B: Backend>(
    f: &Fixture,
    key: &str,
    device: &B::Device,
    dtype: DType,
) -> Tensor<B, 4> {
    let data = f.data(key).unwrap_or_else(|e| panic!("{e}"));
    let shape: [usize; 4] = data.shape.to_vec().try_into().expect("rank 4");
    let values: Vec<f64> = data
        .as_bytes()
        .iter()
        .map(|&q| (f64::from(q) - 128.0) / 8.0)
        .collect();
    Tensor::<B, 4>::from_data(TensorData::new(values, shape), (device, DType::F64)).cast(dtype)
}

/// A sequence-first `[HW, B, C]` input as the feature map `[B, C, h, w]`.
pub fn sequence_to_map<B: Backend>(t: Tensor<B, 3>, [h, w]: [usize; 2]) -> Tensor<B, 4> {
    let [_, b, c] = t.dims();
    t.permute([1, 2, 0]).reshape([b, c, h, w])
}

/// The official f32-vs-f64 max |difference| and max |value| of `output` in the `spread <part>`
/// entry of `manifest.json`.
pub fn official_spread(part: &str, output: &str) -> (f64, f64) {
    let path = fixtures_dir().join("sam2_video").join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("manifest.json");
    let entry = &manifest[format!("spread {part}")][output];
    let number = |name: &str| {
        entry[name]
            .as_f64()
            .unwrap_or_else(|| panic!("manifest.json: spread {part} / {output} / {name}"))
    };
    (number("max_abs"), number("max_value"))
}

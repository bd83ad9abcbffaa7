//! Shared helpers of the SAM2 parity tests: the fixture models and inputs.
#![allow(dead_code)]

use std::path::PathBuf;

use burn::tensor::{backend::Backend, Int, Tensor};
use segburn_models::fixtures::{fixtures_dir, max_abs, max_abs_diff, tensor_values, Fixture};
use segburn_models::sam2::{
    import, HighResFeatures, MaskDecoder, MaskDecoderConfig, PointPrompts, PromptEncoder,
    PromptEncoderConfig,
};

/// The fixture file `sam2/<name>`: a stored file, or the formula weights of
/// `sam2/<stem>.keys.txt` for `prompt_encoder.safetensors` / `mask_decoder.safetensors`.
/// Panics with the path and the regenerating command when it is missing.
pub fn fixture_path(name: &str) -> PathBuf {
    segburn_models::fixtures::fixture_path(&format!("sam2/{name}"))
        .unwrap_or_else(|e| panic!("fixture sam2/{name}: {e}"))
}

/// `<fixtures>/sam2/<name>` as it is, whether or not it exists (for error-path tests).
pub fn path_in_fixture_dir(name: &str) -> PathBuf {
    fixtures_dir().join("sam2").join(name)
}

pub fn fixture(name: &str) -> Fixture {
    Fixture::load(&format!("sam2/{name}")).unwrap_or_else(|e| panic!("fixture sam2/{name}: {e}"))
}

/// The fixtures' prompt encoder: 16×16 embedding, 256×256 input.
pub fn prompt_encoder_config() -> PromptEncoderConfig {
    PromptEncoderConfig::new([16, 16], [256, 256])
}

pub fn load_prompt_encoder<B: Backend>(file: &str, device: &B::Device) -> PromptEncoder<B> {
    let module = prompt_encoder_config().init(device);
    let (module, report) = import::load_prompt_encoder(module, &fixture_path(file), true)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(
        report.loaded.len(),
        17,
        "prompt encoder tensors loaded from {file}"
    );
    module
}

pub fn load_mask_decoder<B: Backend>(file: &str, device: &B::Device) -> MaskDecoder<B> {
    let module = MaskDecoderConfig::new().init(device);
    let (module, report) = import::load_mask_decoder(module, &fixture_path(file), true)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(report.is_exact(), "{file}: {report}");
    module
}

/// The batch-1 inputs of `inputs.safetensors`.
pub struct Inputs<B: Backend> {
    pub image_embeddings: Tensor<B, 4>,
    pub high_res: HighResFeatures<B>,
    pub points: PointPrompts<B>,
    pub boxes: Tensor<B, 2>,
    pub mask_input: Tensor<B, 4>,
}

pub fn inputs<B: Backend>(device: &B::Device) -> Inputs<B> {
    let f = fixture("inputs.safetensors");
    let labels: Tensor<B, 2> = f.float("point_labels", device).expect("point_labels");
    Inputs {
        image_embeddings: f
            .float("image_embeddings", device)
            .expect("image_embeddings"),
        high_res: HighResFeatures {
            feat_s0: f.float("feat_s0", device).expect("feat_s0"),
            feat_s1: f.float("feat_s1", device).expect("feat_s1"),
        },
        points: PointPrompts {
            coords: f.float("point_coords", device).expect("point_coords"),
            labels: labels.int(),
        },
        boxes: f.float("boxes", device).expect("boxes"),
        mask_input: f.float("mask_input", device).expect("mask_input"),
    }
}

/// Integer labels from host values.
pub fn labels<B: Backend>(
    values: &[i64],
    shape: [usize; 2],
    device: &B::Device,
) -> Tensor<B, 2, Int> {
    Tensor::<B, 1, Int>::from_ints(values, device).reshape(shape)
}

/// Max |ours − reference| against a fixture key, checking the shapes too.
pub fn max_abs_vs<B: Backend, const D: usize>(ours: Tensor<B, D>, f: &Fixture, key: &str) -> f64 {
    let reference = f.data(key).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ours.dims().to_vec(),
        reference.shape.to_vec(),
        "shape of `{key}` in {}",
        f.path().display()
    );
    let reference = f.values_f64(key).expect(key);
    max_abs_diff(&tensor_values(ours), &reference)
}

/// Max |reference| of a fixture key (to put absolute errors in scale).
pub fn max_abs_value(f: &Fixture, key: &str) -> f64 {
    max_abs(&f.values_f64(key).expect(key))
}

//! An official-format SAM 2.1 checkpoint of the reduced fixture model, for the tests of
//! `predict-sam2` with official weights.

use std::path::{Path, PathBuf};

use segburn_models::fixtures::sam2_hiera_config;
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};

/// The fixture's whole reduced SAM2Base state dict under the official checkpoint's `model.`
/// wrapper, and its configuration as JSON.
pub fn official_files(dir: &Path) -> (PathBuf, PathBuf) {
    let model = super::fixture("sam2_hiera/model.safetensors");
    let tensors: NamedTensors = read_safetensors(&model)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(key, data)| (format!("model.{key}"), data))
        .collect();
    let checkpoint = dir.join("sam2.1 reduced ö.safetensors");
    let bytes = serialize_safetensors(&tensors, None, &checkpoint).expect("serialise");
    std::fs::write(&checkpoint, bytes).expect("write the checkpoint");
    let config = dir.join("model config é.json");
    let json = serde_json::to_string_pretty(&sam2_hiera_config()).expect("config as JSON");
    std::fs::write(&config, json).expect("write the config");
    (checkpoint, config)
}

//! An official-format SAM 2.1 checkpoint of the reduced fixture model, for the tests of
//! `predict-sam2` with official weights.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use burn::backend::{flex::FlexDevice, Flex};
use segburn_models::fixtures::sam2_hiera_config;
use segburn_models::sam2::import::read_checkpoint;
use segburn_models::sam2::official_model::image_model_from_checkpoint;
use segburn_models::sam2::{Sam2, Sam2Config};
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};

/// The fixture's whole reduced SAM2Base state dict under the official checkpoint's `model.`
/// wrapper, and its configuration as JSON.
pub fn official_files(dir: &Path) -> (PathBuf, PathBuf) {
    write_official(
        dir,
        "sam2_hiera/model.safetensors",
        "sam2.1 reduced ö",
        &sam2_hiera_config(),
    )
}

/// `weights` (a fixture) as an official `{"model": …}` checkpoint `<dir>/<name>.safetensors`,
/// and `config` as `<dir>/<name> config é.json`.
fn write_official(
    dir: &Path,
    weights: &str,
    name: &str,
    config: &Sam2Config,
) -> (PathBuf, PathBuf) {
    let tensors: NamedTensors = read_safetensors(&super::fixture(weights))
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(key, data)| (format!("model.{key}"), data))
        .collect();
    let checkpoint = dir.join(format!("{name}.safetensors"));
    let bytes = serialize_safetensors(&tensors, None, &checkpoint).expect("serialise");
    std::fs::write(&checkpoint, bytes).expect("write the checkpoint");
    let config_path = dir.join(format!("{name} config é.json"));
    let json = serde_json::to_string_pretty(config).expect("config as JSON");
    std::fs::write(&config_path, json).expect("write the config");
    (checkpoint, config_path)
}

/// `predict-sam2`'s arguments for the files of [`official_files`], a photo and an output
/// folder; the prompt (or `--everything`) flags follow.
pub fn predict_args<'a>(
    checkpoint: &'a Path,
    config: &'a Path,
    photo: &'a Path,
    out: &'a Path,
) -> Vec<&'a OsStr> {
    vec![
        "--checkpoint".as_ref(),
        checkpoint.as_os_str(),
        "--model-config".as_ref(),
        config.as_os_str(),
        photo.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]
}

/// The model of an [`official_files`] checkpoint, loaded as the library loads it.
pub fn official_model(checkpoint: &Path) -> Sam2<Flex> {
    let tensors = read_checkpoint(checkpoint).expect("checkpoint");
    let name = checkpoint.display().to_string();
    image_model_from_checkpoint::<Flex>(&tensors, Some(sam2_hiera_config()), &name, &FlexDevice)
        .unwrap_or_else(|e| panic!("{e}"))
        .model
}

/// The reduced video model of the video fixtures (`sam2_video/video_model.safetensors`) as an
/// official `{"model": …}` checkpoint, and its configuration as JSON.
pub fn official_video_files(dir: &Path) -> (PathBuf, PathBuf) {
    let config = segburn_models::fixtures::sam2_video_config();
    write_official(
        dir,
        "sam2_video/video_model.safetensors",
        "sam2.1 video ö",
        &config,
    )
}

//! The SAM 2.1 image models segburn builds have exactly the official keys and shapes (all four
//! sizes); with the video memory, every key of the official listings. Official checkpoints load
//! strictly into an image model with only the video-memory keys left over, and into a video
//! model with none.

mod sam2_hiera_support;

use std::collections::BTreeMap;

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::TensorData;
use sam2_hiera_support::{listing, model_path, reduced_config};
use segburn_models::fixtures::{fixture_path, reference_dir};
use segburn_models::sam2::import::{self, is_video_memory_key};
use segburn_models::sam2::{HieraSize, Sam2Config, Sam2Error};
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};
use segburn_models::weights::{dotted_path, named_shapes, WeightsError};

type B = Flex;

fn count(shapes: &BTreeMap<String, Vec<usize>>, prefix: &str) -> usize {
    shapes
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, s)| s.iter().product::<usize>())
        .sum()
}

#[test]
fn all_four_official_models_have_exactly_the_official_image_keys_and_shapes() {
    let device = FlexDevice;
    // (size, listing, image_encoder parameters from the spec's table)
    let sizes = [
        (HieraSize::Tiny, "t", 27_219_136),
        (HieraSize::Small, "s", 34_316_992),
        (HieraSize::BasePlus, "b+", 69_106_816),
        (HieraSize::Large, "l", 212_703_280),
    ];
    for (size, name, encoder_params) in sizes {
        let file = reference_dir().join(format!("state_dict_sam2.1_hiera_{name}.txt"));
        let official = listing(&file);
        let (video, image): (BTreeMap<_, _>, BTreeMap<_, _>) = official
            .into_iter()
            .partition(|(k, _)| is_video_memory_key(k));
        assert!(
            !video.is_empty(),
            "{name}: the listing has video-memory keys"
        );
        let config = Sam2Config::sam2_1_hiera(size);
        config.check().expect("official config");
        let model = config.init::<B>(&device);
        let ours: Vec<(String, Vec<usize>)> = named_shapes(&model, &dotted_path);
        let ours_map: BTreeMap<String, Vec<usize>> = ours.iter().cloned().collect();
        assert_eq!(ours.len(), ours_map.len(), "{name}: duplicate keys");
        let missing: Vec<_> = image
            .keys()
            .filter(|k| !ours_map.contains_key(*k))
            .collect();
        let extra: Vec<_> = ours_map
            .keys()
            .filter(|k| !image.contains_key(*k))
            .collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: missing {missing:?}, extra {extra:?}"
        );
        for (key, shape) in &image {
            assert_eq!(&ours_map[key], shape, "{name}: shape of {key}");
        }
        assert_eq!(count(&ours_map, "image_encoder."), encoder_params, "{name}");
        drop(model);

        // The whole SAM2Base: the video memory too, so that no tensor is left unused.
        let config = Sam2Config::sam2_1_hiera_video(size);
        config.check().expect("official video config");
        let whole: BTreeMap<String, Vec<usize>> =
            named_shapes(&config.init::<B>(&device), &dotted_path)
                .into_iter()
                .collect();
        let official: BTreeMap<String, Vec<usize>> =
            image.into_iter().chain(video.clone()).collect();
        let differing: Vec<_> = official
            .iter()
            .filter(|(k, s)| whole.get(*k) != Some(s))
            .map(|(k, _)| k)
            .chain(whole.keys().filter(|k| !official.contains_key(*k)))
            .collect();
        assert!(
            differing.is_empty(),
            "{name}: video model differs at {differing:?}"
        );
        println!(
            "{name}: {} image-model keys equal the listing; the video model has all {} keys \
             ({} video-memory keys)",
            ours_map.len(),
            whole.len(),
            video.len()
        );
    }
}

/// The reduced model's formula weights (`sam2_hiera/model.keys.txt`).
fn model_file() -> std::path::PathBuf {
    model_path()
}

#[test]
fn official_format_pt_loads_the_same_tensors_as_the_safetensors() {
    let device = FlexDevice;
    let path = fixture_path("sam2_hiera/model_subset_official_format.pt").unwrap();
    let reference = read_safetensors(&model_file()).expect("model.safetensors");
    let subset = import::read_checkpoint(&path).expect("official .pt container");
    assert_eq!(subset.len(), 13);
    let model = reduced_config().init::<B>(&device);
    let (model, report) = import::load_official(model, &path, false).expect("partial load");
    assert_eq!(report.loaded.len(), 13, "{report}");
    assert!(
        report.unexpected.is_empty() && report.not_used.is_empty(),
        "{report}"
    );
    let exported = import::export(&model);
    for key in subset.keys() {
        assert_eq!(
            exported[key], reference[key],
            "{key} differs from model.safetensors"
        );
    }
    // Strictly, the subset is missing everything else, and says so.
    let model = reduced_config().init::<B>(&device);
    let error = import::load_official(model, &path, true).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("missing from the file"), "{message}");
    assert!(
        message.contains("model_subset_official_format.pt"),
        "{message}"
    );
}

/// Writes `tensors` to `<temp>/segburn hiera ü <pid> <test>/<name>` (one folder per test: the
/// tests run in parallel and each removes its own).
fn write_temp(test: &str, name: &str, tensors: &NamedTensors) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("segburn hiera ü {} {test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    let bytes = serialize_safetensors(tensors, None, &path).expect("serialize");
    std::fs::write(&path, bytes).expect("write");
    path
}

#[test]
fn strict_loading_reports_video_keys_and_rejects_anything_else() {
    let device = FlexDevice;
    let tensors = read_safetensors(&model_file()).expect("model.safetensors");
    let model = reduced_config().init::<B>(&device);
    let (loaded, report) = import::load_official(model, &model_file(), true).expect("strict load");
    let video = tensors.keys().filter(|k| is_video_memory_key(k)).count();
    assert_eq!(report.not_used.len(), video, "{report}");
    assert_eq!(report.loaded.len() + video, tensors.len(), "{report}");
    assert!(
        report.unexpected.is_empty() && report.missing.is_empty(),
        "{report}"
    );
    // Export writes back exactly the image-model part of the file.
    let exported = import::export(&loaded);
    assert_eq!(exported.len(), report.loaded.len());
    for (key, data) in &exported {
        assert_eq!(data, &tensors[key], "{key}");
    }

    // An unknown key under the image encoder fails a strict load of a Hiera model.
    let mut extra = tensors.clone();
    extra.insert(
        "image_encoder.trunk.blocks.99.norm1.weight".into(),
        TensorData::new(vec![1.0f32; 4], [4]),
    );
    let path = write_temp("strict", "extra.safetensors", &extra);
    let error =
        import::load_official(reduced_config().init::<B>(&device), &path, true).unwrap_err();
    assert!(
        matches!(&error, Sam2Error::Weights(WeightsError::Strict { report, .. })
            if report.unexpected == ["image_encoder.trunk.blocks.99.norm1.weight"]),
        "{error}"
    );
    // So does a missing one.
    let mut missing = tensors.clone();
    missing.remove("no_mem_embed");
    let path = write_temp("strict", "missing.safetensors", &missing);
    let error =
        import::load_official(reduced_config().init::<B>(&device), &path, true).unwrap_err();
    assert!(error.to_string().contains("no_mem_embed"), "{error}");
    std::fs::remove_dir_all(path.parent().expect("dir")).ok();
}

#[test]
fn the_reduced_video_model_uses_every_tensor_of_the_file() {
    let device = FlexDevice;
    let tensors = read_safetensors(&model_file()).expect("model.safetensors");
    let config = segburn_models::fixtures::sam2_video_config();
    config.check().expect("the reduced video config is valid");
    let (loaded, report) =
        import::load_official(config.init::<B>(&device), &model_file(), true).expect("strict load");
    assert!(
        report.not_used.is_empty() && report.unexpected.is_empty() && report.missing.is_empty(),
        "{report}"
    );
    assert_eq!(report.loaded.len(), tensors.len(), "{report}");
    assert!(tensors.keys().any(|k| is_video_memory_key(k)));
    // Export writes back the whole file.
    let exported = import::export(&loaded);
    assert_eq!(exported.len(), tensors.len());
    for (key, data) in &exported {
        assert_eq!(data, &tensors[key], "{key}");
    }
    // A file without its video tensors is refused by a video model, naming one.
    let image_only: NamedTensors = tensors
        .into_iter()
        .filter(|(k, _)| !is_video_memory_key(k))
        .collect();
    let path = write_temp("video", "image_only.safetensors", &image_only);
    let error = import::load_official(config.init::<B>(&device), &path, true).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("memory_attention.layers.0"), "{message}");
    std::fs::remove_dir_all(path.parent().expect("dir")).ok();
}

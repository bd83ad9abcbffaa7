//! Importing and exporting SAM2 weights under the official keys: both file formats, the
//! SAM2Base checkpoint layout, shape errors, and the non-trained position-encoding buffer.

mod sam2_support;

use std::collections::BTreeMap;

use burn::backend::{flex::FlexDevice, Autodiff, Flex};
use burn::tensor::TensorData;
use sam2_support::{
    fixture_path, load_mask_decoder, load_prompt_encoder, path_in_fixture_dir,
    prompt_encoder_config,
};
use segburn_models::sam2::{import, MaskDecoderConfig, Sam2, Sam2Config, Sam2Error};
use segburn_models::tensor_file::{serialize_safetensors, NamedTensors};
use segburn_models::weights::{dotted_path, export_named, WeightsError};

type B = Flex;

/// The key and shape of every official key, with SAM2Base's prefixes: the listings
/// `prompt_encoder.keys.txt` and `mask_decoder.keys.txt` that the generator takes from the
/// official modules.
fn official_keys() -> BTreeMap<String, Vec<usize>> {
    let mut keys = BTreeMap::new();
    for (listing, prefix) in [
        ("prompt_encoder.keys.txt", "sam_prompt_encoder."),
        ("mask_decoder.keys.txt", "sam_mask_decoder."),
    ] {
        let part = segburn_models::fixtures::key_listing(&fixture_path(listing))
            .unwrap_or_else(|e| panic!("{listing}: {e}"));
        keys.extend(part.into_iter().map(|(k, v)| (format!("{prefix}{k}"), v)));
    }
    keys
}

fn heads_model(device: &FlexDevice) -> Sam2<B> {
    Sam2Config::new(prompt_encoder_config(), MaskDecoderConfig::new()).init(device)
}

/// Writes tensors to a fresh safetensors file in the temp directory.
fn write_temp(name: &str, tensors: &NamedTensors) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("segburn-{}-{name}", std::process::id()));
    let bytes = serialize_safetensors(tensors, None, &path).expect("serialize");
    std::fs::write(&path, bytes).expect("write temp file");
    path
}

fn assert_same_tensors(a: &NamedTensors, b: &NamedTensors) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (key, data) in a {
        assert_eq!(data, &b[key], "tensor `{key}` differs");
    }
}

/// The mask decoder tensors stored in `mask_decoder_subset.pt` (the full file is 17 MB).
const DECODER_PT_SUBSET: usize = 10;

#[test]
fn pt_and_safetensors_give_identical_models() {
    let device = FlexDevice;
    let from_pt = load_prompt_encoder::<B>("prompt_encoder.pt", &device);
    let from_st = load_prompt_encoder::<B>("prompt_encoder.safetensors", &device);
    assert_same_tensors(
        &export_named(&from_pt, &dotted_path),
        &export_named(&from_st, &dotted_path),
    );

    // The decoder's `.pt` holds a subset (tokens, conv / transposed-conv / linear weights, a
    // norm bias, a [1] bias): every tensor must equal the safetensors one, key by key.
    let path = fixture_path("mask_decoder_subset.pt");
    let subset = import::read_checkpoint(&path).expect("mask_decoder_subset.pt");
    assert_eq!(subset.len(), DECODER_PT_SUBSET);
    let (from_pt, report) =
        import::load_mask_decoder(MaskDecoderConfig::new().init::<B>(&device), &path, false)
            .expect("partial load of the subset");
    assert_eq!(report.loaded.len(), DECODER_PT_SUBSET, "{report}");
    assert!(report.unexpected.is_empty(), "{report}");
    let exported = export_named(&from_pt, &dotted_path);
    let from_st = export_named(
        &load_mask_decoder::<B>("mask_decoder.safetensors", &device),
        &dotted_path,
    );
    for (key, data) in &subset {
        assert_eq!(data, &from_st[key], "{key}: the .pt tensor differs");
        assert_eq!(&exported[key], data, "{key}: not loaded as read");
    }
    // Strictly, the subset is missing everything else, and says so.
    let strict =
        import::load_mask_decoder(MaskDecoderConfig::new().init::<B>(&device), &path, true);
    let message = strict.expect_err("strict load of a subset").to_string();
    assert!(message.contains("mask_decoder_subset.pt"), "{message}");
    assert!(message.contains("missing from the file (121)"), "{message}");
}

#[test]
fn export_uses_exactly_the_official_keys_and_round_trips() {
    let device = FlexDevice;
    let mut model = heads_model(&device);
    model.sam_prompt_encoder = load_prompt_encoder("prompt_encoder.safetensors", &device);
    model.sam_mask_decoder = load_mask_decoder("mask_decoder.safetensors", &device);
    let exported = import::export(&model);
    let official = official_keys();
    assert_eq!(official.len(), 148);
    assert_eq!(
        exported.keys().collect::<Vec<_>>(),
        official.keys().collect::<Vec<_>>()
    );
    for (key, shape) in &official {
        assert_eq!(&exported[key].shape.to_vec(), shape, "shape of {key}");
    }

    // An official SAM2Base checkpoint: `{"model": ...}` next to modules we do not port.
    let mut checkpoint: NamedTensors = exported
        .iter()
        .map(|(k, v)| (format!("model.{k}"), v.clone()))
        .collect();
    for key in ["model.image_encoder.trunk.pos_embed", "model.no_mem_embed"] {
        checkpoint.insert(key.into(), TensorData::new(vec![0.5f32; 4], [1, 4]));
    }
    let path = write_temp("sam2_official.safetensors", &checkpoint);
    let fresh = Sam2Config::sam2_1(256).init::<B>(&device);
    let (loaded, report) = import::load_official(fresh, &path, true).expect("strict official load");
    std::fs::remove_file(&path).ok();
    assert_eq!(report.loaded.len(), 148);
    assert!(report.missing.is_empty(), "{report}");
    assert_eq!(
        report.unexpected,
        ["image_encoder.trunk.pos_embed", "no_mem_embed"]
    );
    assert!(loaded.image_encoder.is_some(), "our encoder is kept");
    let mut again = import::export(&loaded);
    again.retain(|k, _| !k.starts_with("image_encoder."));
    assert_same_tensors(&again, &exported);
}

#[test]
fn a_wrong_shape_is_a_clear_error() {
    let device = FlexDevice;
    let model = load_mask_decoder::<B>("mask_decoder.safetensors", &device);
    let mut tensors = export_named(&model, &dotted_path);
    let key = "iou_prediction_head.layers.2.weight";
    tensors.insert(key.into(), TensorData::new(vec![0.0f32; 3 * 256], [3, 256]));
    let path = write_temp("sam2_bad_shape.safetensors", &tensors);

    let strict =
        import::load_mask_decoder(MaskDecoderConfig::new().init::<B>(&device), &path, true);
    let error = strict.expect_err("strict load must reject a mis-shaped tensor");
    let message = error.to_string();
    assert!(
        matches!(error, Sam2Error::Weights(WeightsError::Strict { .. })),
        "{message}"
    );
    assert!(message.contains(key), "{message}");
    assert!(
        message.contains("[3, 256]") && message.contains("[4, 256]"),
        "{message}"
    );

    let (_, report) =
        import::load_mask_decoder(MaskDecoderConfig::new().init::<B>(&device), &path, false)
            .expect("a partial load reports instead");
    std::fs::remove_file(&path).ok();
    assert_eq!(report.shape_mismatched.len(), 1);
    assert_eq!(report.loaded.len(), 130);

    let missing = import::load_mask_decoder(
        MaskDecoderConfig::new().init::<B>(&device),
        &path_in_fixture_dir("no_such_file.pt"),
        true,
    );
    assert!(missing.unwrap_err().to_string().contains("no_such_file.pt"));
}

#[test]
fn the_position_encoding_matrix_stays_a_non_trained_buffer() {
    type A = Autodiff<Flex>;
    let device = FlexDevice;
    let encoder = load_prompt_encoder::<A>("prompt_encoder.safetensors", &device);
    let matrix = &encoder.pe_layer.positional_encoding_gaussian_matrix;
    assert!(
        !matrix.val().is_require_grad(),
        "buffer must not require grad after import"
    );
    assert!(encoder.no_mask_embed.weight.val().is_require_grad());

    let loss = encoder.get_dense_pe().sum() + encoder.no_mask_embed.weight.val().sum();
    let grads = loss.backward();
    assert!(matrix.grad(&grads).is_none(), "the buffer got a gradient");
    assert!(encoder.no_mask_embed.weight.grad(&grads).is_some());
    let params = burn::optim::GradientsParams::from_grads(grads, &encoder);
    assert!(params.get::<Flex, 2>(matrix.id).is_none());
}

//! Importing official PIDNet checkpoints: formats, prefixes, bad files, export round trip, and
//! the S/M/L parameter counts and key sets.
//!
//! The full PIDNet-S weights are the formula weights of `pidnet_s/state_dict.keys.txt` (a
//! `.safetensors` file built on first use); the `.pt` reader is checked on
//! `pidnet_s/state_dict_subset.pt`, a plain `torch.save` of 15 of those tensors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::backend::Flex;
use burn::tensor::TensorData;
use segburn_models::fixtures::{fixture_path, reference_dir};
use segburn_models::pidnet::{
    load_pidnet, pidnet_state_dict, read_pidnet_tensors, save_pidnet_safetensors, LoadMode,
    PidNetConfig, PidNetSize,
};
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};
use segburn_models::weights::is_buffer_key;

type B = Flex;

/// `pidnet_s/<name>` of the fixtures (the formula weights for `state_dict.safetensors`).
fn fixture(name: &str) -> PathBuf {
    fixture_path(&format!("pidnet_s/{name}")).unwrap()
}

/// The `.pt` subset: 15 official-format tensors (convs, a BN with its int64 counter, heads).
const PT_SUBSET: &str = "state_dict_subset.pt";

/// A scratch directory whose name has spaces and non-ASCII characters.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("données d'essai").join("数据");
    std::fs::create_dir_all(&dir).unwrap();
    (root, dir)
}

fn write(tensors: &NamedTensors, path: &Path) {
    std::fs::write(path, serialize_safetensors(tensors, None, path).unwrap()).unwrap();
}

fn as_bytes(tensors: &NamedTensors) -> BTreeMap<String, (Vec<usize>, Vec<u8>)> {
    tensors
        .iter()
        .map(|(k, v)| (k.clone(), (v.shape.to_vec(), v.as_bytes().to_vec())))
        .collect()
}

fn load_s(path: &Path, mode: LoadMode) -> NamedTensors {
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&Default::default());
    let (model, _) = load_pidnet(model, path, mode).expect("load");
    pidnet_state_dict(&model)
}

#[test]
fn pt_subset_holds_the_safetensors_values_and_partial_load_reports_the_rest() {
    let subset = fixture(PT_SUBSET);
    let from_pt = read_pidnet_tensors(&subset).unwrap();
    let full = read_safetensors(&fixture("state_dict.safetensors")).unwrap();
    assert_eq!(from_pt.len(), 15);
    let from_st: NamedTensors = from_pt
        .keys()
        .map(|k| (k.clone(), full[k].clone()))
        .collect();
    // Key by key: shape, dtype (f32, the counter's int64) and bytes.
    assert_eq!(as_bytes(&from_pt), as_bytes(&from_st));
    for (key, value) in &from_pt {
        assert_eq!(value.dtype, full[key].dtype, "{key}");
    }
    let counter = &from_pt["conv1.1.num_batches_tracked"];
    assert!(counter.shape.is_empty(), "a 0-d int64 like PyTorch's");
    assert_eq!(counter.dtype, burn::tensor::DType::I64);

    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&Default::default());
    let (model, report) = load_pidnet(model, &subset, LoadMode::Partial).unwrap();
    assert_eq!(report.loaded.len(), 15, "{report}");
    assert_eq!(report.missing.len(), 479 - 15, "{report}");
    assert!(report.unexpected.is_empty() && report.shape_mismatched.is_empty());
    let loaded = pidnet_state_dict(&model);
    for (key, value) in &from_pt {
        assert_eq!(
            loaded[key].as_bytes(),
            value.as_bytes(),
            "{key} loaded from the .pt"
        );
    }

    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&Default::default());
    let err = load_pidnet(model, &subset, LoadMode::Strict)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("missing from the file (464)") && err.contains(PT_SUBSET),
        "{err}"
    );
}

#[test]
fn export_round_trips_bit_exactly_with_the_official_key_set() {
    let original = read_safetensors(&fixture("state_dict.safetensors")).unwrap();
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&Default::default());
    let (model, _) =
        load_pidnet(model, &fixture("state_dict.safetensors"), LoadMode::Strict).unwrap();
    let (_root, dir) = scratch();
    let out = dir.join("exported model.safetensors");
    save_pidnet_safetensors(&model, &out).unwrap();
    let exported = read_safetensors(&out).unwrap();
    assert_eq!(as_bytes(&exported), as_bytes(&original));
    let counter = &exported["conv1.1.num_batches_tracked"];
    assert!(
        counter.shape.is_empty(),
        "num_batches_tracked is a 0-d int64 like PyTorch's"
    );
}

#[test]
fn wrapper_prefixes_and_loss_buffers_are_handled() {
    let original = read_safetensors(&fixture("state_dict.safetensors")).unwrap();
    let (_root, dir) = scratch();
    for prefix in ["model.", "module.", "model.module.", "state_dict."] {
        let mut prefixed: NamedTensors = original
            .iter()
            .map(|(k, v)| (format!("{prefix}{k}"), v.clone()))
            .collect();
        // Official Cityscapes checkpoints also carry the loss's class-weight buffer.
        prefixed.insert(
            "sem_loss.criterion.weight".into(),
            TensorData::new(vec![1.0f32; 19], [19]),
        );
        let path = dir.join(format!("{prefix}checkpoint.safetensors"));
        write(&prefixed, &path);
        let loaded = load_s(&path, LoadMode::Strict);
        assert_eq!(as_bytes(&loaded), as_bytes(&original), "prefix {prefix}");
    }
}

#[test]
fn truncated_files_are_clear_errors() {
    let (_root, dir) = scratch();
    for name in [PT_SUBSET, "state_dict.safetensors"] {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let path = dir.join(format!("truncated {name}"));
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&Default::default());
        let err = load_pidnet(model, &path, LoadMode::Strict)
            .unwrap_err()
            .to_string();
        assert!(err.contains("数据"), "the error names the file: {err}");
        assert!(err.contains("truncated"), "{err}");
    }
}

#[test]
fn wrong_shapes_and_class_counts_are_reported() {
    let mut tensors = read_pidnet_tensors(&fixture("state_dict.safetensors")).unwrap();
    tensors.insert(
        "layer1.0.conv1.weight".into(),
        TensorData::new(vec![0.0f32; 32 * 32], [32, 32, 1, 1]),
    );
    let (_root, dir) = scratch();
    let path = dir.join("bad shape.safetensors");
    write(&tensors, &path);
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(&Default::default());
    let err = load_pidnet(model, &path, LoadMode::Strict)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("layer1.0.conv1.weight: file [32, 32, 1, 1], model [32, 32, 3, 3]"),
        "{err}"
    );

    let model = PidNetConfig::new(PidNetSize::S, 11).init::<B>(&Default::default());
    let err = load_pidnet(model, &fixture("state_dict.safetensors"), LoadMode::Strict)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checkpoint has 19 classes, the config has 11"),
        "{err}"
    );

    // Partial loading keeps the backbone and names the class heads it skipped.
    let model = PidNetConfig::new(PidNetSize::S, 11).init::<B>(&Default::default());
    let (_, report) =
        load_pidnet(model, &fixture("state_dict.safetensors"), LoadMode::Partial).unwrap();
    let mut skipped: Vec<&str> = report
        .shape_mismatched
        .iter()
        .map(|(k, _, _)| k.as_str())
        .collect();
    skipped.sort_unstable();
    let heads = [
        "final_layer.conv2.bias",
        "final_layer.conv2.weight",
        "seghead_p.conv2.bias",
        "seghead_p.conv2.weight",
    ];
    assert_eq!(skipped, heads, "{report}");
    assert_eq!(report.loaded.len(), 475);
}

/// Official keys and shapes from `state_dict_pidnet_{s,m,l}.txt`.
fn reference_keys(size: &str) -> BTreeMap<String, Vec<usize>> {
    let text =
        std::fs::read_to_string(reference_dir().join(format!("state_dict_pidnet_{size}.txt")))
            .unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut parts = line.split('\t');
            let key = parts.next().unwrap().to_string();
            let shape = parts.next().unwrap().trim_matches(|c| c == '[' || c == ']');
            let shape = shape
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().parse().unwrap())
                .collect();
            (key, shape)
        })
        .collect()
}

fn trainable_params(tensors: &NamedTensors) -> usize {
    tensors
        .iter()
        .filter(|(k, _)| !is_buffer_key(k))
        .map(|(_, v)| v.shape.iter().product::<usize>())
        .sum()
}

#[test]
fn parameter_counts_and_key_sets_match_official_for_all_sizes() {
    let device = Default::default();
    let cases = [
        (PidNetSize::S, "s", 7_720_935, 7_625_715),
        (PidNetSize::M, "m", 28_763_111, 28_538_515),
        (PidNetSize::L, "l", 37_314_311, 36_939_571),
    ];
    for (size, name, with_aux, inference) in cases {
        let full = pidnet_state_dict(&PidNetConfig::new(size, 19).init::<B>(&device));
        assert_eq!(
            trainable_params(&full),
            with_aux,
            "PIDNet-{name} training graph"
        );
        let ours: BTreeMap<String, Vec<usize>> = full
            .iter()
            .map(|(k, v)| (k.clone(), v.shape.to_vec()))
            .collect();
        assert_eq!(ours, reference_keys(name), "PIDNet-{name} keys and shapes");

        let lean = PidNetConfig::new(size, 19)
            .with_augment(false)
            .init::<B>(&device);
        assert_eq!(
            trainable_params(&pidnet_state_dict(&lean)),
            inference,
            "PIDNet-{name} inference graph"
        );
    }
}

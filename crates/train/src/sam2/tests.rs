//! The SAM2 loop end to end on the bundled sample: learning, exact resume, parameter
//! selection, cached embeddings and configuration errors.

use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, Flex};
use segburn_data::layout::Layout;
use segburn_data::objects::{Connectivity, ObjectDataConfig, ObjectSource};
use segburn_models::sam2::import;
use segburn_models::tensor_file::NamedTensors;

use super::*;
use crate::checkpoint::load_checkpoint;
use crate::stop_signal::StopSignal;

type A = Autodiff<Flex>;

fn sample_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample")
}

/// A small model and run: 64 px inputs, 64-wide heads, 2 correction clicks.
pub(super) fn tiny_setup(run_dir: &Path, max_steps: u64) -> Sam2Setup {
    Sam2Setup {
        model: Sam2ModelConfig {
            image_size: 64,
            image_encoder: ImageEncoderChoice::cnn([16, 32, 64]),
            transformer_dim: 64,
            num_heads: 4,
            mlp_dim: 128,
            ..Sam2ModelConfig::default()
        },
        data: ObjectDataConfig {
            source: ObjectSource::SemanticComponents {
                layout: Layout::Cityscapes {
                    root: sample_root(),
                },
                min_area: 400,
                connectivity: Connectivity::Four,
                classes: None,
                ignore_index: 255,
            },
            batch_size: 2,
            objects_per_image: 3,
            eval_objects_per_image: 4,
            prefetch: 1,
            ..ObjectDataConfig::default()
        },
        prompts: PromptConfig {
            correction_steps: 2,
            box_noise_max: 4.0,
            eval_corrections: 2,
            ..PromptConfig::default()
        },
        train: Sam2TrainConfig {
            epochs: 4,
            max_steps: Some(max_steps),
            lr: 1e-3,
            validate_at_end: false,
            log_every_steps: 5,
            run_dir: run_dir.to_path_buf(),
            ..Sam2TrainConfig::default()
        },
        ..Sam2Setup::default()
    }
}

fn quiet(_: &Sam2Event) {}

/// Asserts two trainers are at the same position with bit-identical weights and optimizer
/// state; returns the weights.
pub(super) fn assert_same_run(a: &Sam2Trainer<A>, b: &Sam2Trainer<A>) -> NamedTensors {
    assert_eq!(a.state(), b.state());
    let (wa, wb) = (import::export(a.model()), import::export(b.model()));
    assert_eq!(wa.len(), wb.len());
    for (key, value) in &wa {
        assert_eq!(
            value.as_bytes(),
            wb[key].as_bytes(),
            "model tensor {key} differs"
        );
    }
    let (oa, ob) = (
        a.optimizer_state().expect("state"),
        b.optimizer_state().expect("state"),
    );
    assert_eq!(oa.keys().collect::<Vec<_>>(), ob.keys().collect::<Vec<_>>());
    for (key, value) in &oa {
        assert_eq!(
            value.as_bytes(),
            ob[key].as_bytes(),
            "optimizer tensor {key} differs"
        );
    }
    wa
}

/// Writes the embeddings of the sample's 12 val images with `model` to `folder` (a path with
/// `{split}`), which `setup` then reads (unflipped, as they were written).
pub(super) fn write_val_embeddings<B: burn::tensor::backend::Backend>(
    model: &segburn_models::sam2::Sam2<B>,
    setup: &mut Sam2Setup,
    folder: PathBuf,
) -> Vec<write_embeddings::EmbeddingSummary> {
    setup.data.embeddings = Some(folder);
    setup.data.flip = false;
    let written = write_embeddings::write_cached_embeddings(
        model,
        &setup.data,
        &["val".to_string()],
        setup.model.image_size,
        &Default::default(),
        "test",
        &mut |_, _, _| {},
    )
    .expect("embeddings");
    assert_eq!(written[0].files, 12);
    written
}

#[test]
fn a_run_stopped_on_request_resumes_bit_for_bit() {
    let n = 3;
    let straight_dir = tempfile::tempdir().expect("tempdir");
    let resumed_dir = tempfile::tempdir().expect("tempdir");

    // The uninterrupted run, with its initial weights saved so the other run can start there.
    let mut straight =
        Sam2Trainer::<A>::new(tiny_setup(straight_dir.path(), 2 * n), Default::default())
            .expect("trainer");
    let initial = straight.save(&mut quiet).expect("initial checkpoint");
    straight.run(&mut quiet).expect("2N steps");

    // Interrupted (as Ctrl-C does) after step N of 2N: it saves and stops there.
    let stop = StopSignal::new();
    let mut first_half =
        Sam2Trainer::<A>::new(tiny_setup(resumed_dir.path(), 2 * n), Default::default())
            .expect("trainer")
            .with_stop_signal(stop.clone());
    first_half.resume(&initial).expect("resume at 0");
    let half = first_half
        .run(&mut |event: &Sam2Event| {
            if matches!(event, Sam2Event::Step(r) if r.step == n) {
                stop.request();
            }
        })
        .expect("N steps");
    assert!(half.stopped && half.steps == n, "{half:?}");
    assert!(half.final_report.is_none());
    let checkpoint = half.last_checkpoint.expect("checkpoint at N");
    assert!(checkpoint.ends_with("step_00000003.safetensors"));
    drop(first_half);

    let mut second_half =
        Sam2Trainer::<A>::new(tiny_setup(resumed_dir.path(), 2 * n), Default::default())
            .expect("trainer");
    second_half.resume(&checkpoint).expect("resume at N");
    assert_eq!(second_half.state().step, n);
    second_half.run(&mut quiet).expect("N more steps");

    let a = assert_same_run(&straight, &second_half);
    let compared = a.len();
    // The weights moved: the comparison is not vacuous.
    let init = load_checkpoint(&initial).expect("initial");
    let moved = a
        .iter()
        .filter(|(k, v)| init.model[*k].as_bytes() != v.as_bytes())
        .count();
    assert!(
        moved > compared / 2,
        "{moved} of {compared} tensors changed"
    );
}

#[test]
fn the_position_buffer_and_a_frozen_encoder_stay_out_of_the_optimizer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut setup = tiny_setup(dir.path(), 1);
    let trainer = Sam2Trainer::<A>::new(setup.clone(), Default::default()).expect("trainer");
    let keys: Vec<&str> = trainer
        .trained_params()
        .iter()
        .map(|p| p.key.as_str())
        .collect();
    assert!(!keys.contains(&POSITION_BUFFER_KEY));
    assert!(keys.iter().any(|k| k.starts_with("image_encoder.")));
    // One trainer holds a run directory at a time (its lock).
    drop(trainer);

    setup.model.freeze_image_encoder = true;
    let mut frozen = Sam2Trainer::<A>::new(setup, Default::default()).expect("trainer");
    assert!(frozen
        .trained_params()
        .iter()
        .all(|p| !p.key.starts_with("image_encoder.")));
    let before = import::export(frozen.model());
    frozen.run(&mut quiet).expect("one step");
    let after = import::export(frozen.model());
    for (key, value) in &before {
        let same = value.as_bytes() == after[key].as_bytes();
        if key.starts_with("image_encoder.") || key == POSITION_BUFFER_KEY {
            assert!(same, "{key} changed");
        }
    }
    assert!(before
        .iter()
        .any(|(k, v)| k.starts_with("sam_mask_decoder.") && v.as_bytes() != after[k].as_bytes()));
}

#[test]
fn decoder_trains_from_cached_embeddings_written_by_our_encoder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let end_to_end = tiny_setup(&dir.path().join("run"), 1);
    let device = Default::default();
    let encoder =
        write_embeddings::encoder_model::<Flex>(&end_to_end.model, None, &device).expect("encoder");
    let mut cached = end_to_end.clone();
    let folder = dir.path().join("données d'essai/数据/{split}");
    let written = write_val_embeddings(&encoder, &mut cached, folder);
    assert!(written[0].dir.ends_with("数据/val"));

    // Train on the val split's embeddings, with no encoder at all.
    cached.model.image_encoder = ImageEncoderChoice::NONE;
    cached.data.train_split = "val".to_string();
    cached.train.run_dir = dir.path().join("cached run");
    let mut trainer = Sam2Trainer::<A>::new(cached.clone(), Default::default()).expect("trainer");
    assert!(trainer.model().image_encoder.is_none());
    let summary = trainer.run(&mut quiet).expect("one step");
    assert_eq!(summary.steps, 1);

    // A file of the wrong size names the file, the tensor and both shapes.
    let mut wrong = cached.clone();
    wrong.model.image_size = 128;
    wrong.train.run_dir = dir.path().join("wrong run");
    let mut trainer = Sam2Trainer::<A>::new(wrong, Default::default()).expect("trainer");
    let error = trainer.run(&mut quiet).unwrap_err().to_string();
    assert!(
        error.contains("image_embed") && error.contains("[64, 8, 8]"),
        "{error}"
    );
    assert!(error.contains("数据"), "{error}");
}

/// A change to a setup and the text its error must contain.
type ConfigCase = (Box<dyn Fn(&mut Sam2Setup)>, &'static str);

#[test]
fn configuration_errors_name_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: Vec<ConfigCase> = vec![
        (Box::new(|s| s.model.image_size = 100), "model.image_size"),
        (Box::new(|s| s.train.lr = -1.0), "train.lr"),
        (Box::new(|s| s.prompts.prob_box = 2.0), "prompts.prob_box"),
        (Box::new(|s| s.data.batch_size = 0), "data.batch_size"),
        (
            Box::new(|s| s.model.image_encoder = ImageEncoderChoice::NONE),
            "data.embeddings",
        ),
        (Box::new(|s| s.model.num_heads = 5), "num_heads"),
        (
            Box::new(|s| s.data.batch_size = 100),
            "fewer than one optimizer step",
        ),
    ];
    for (change, expected) in cases {
        let mut setup = tiny_setup(dir.path(), 1);
        change(&mut setup);
        let error = match Sam2Trainer::<A>::new(setup, Default::default()) {
            Ok(_) => panic!("accepted a config that should mention {expected}"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(expected), "{expected}: {error}");
    }
}

/// `--init-from` an official SAM2.1 checkpoint (`{"model": …}` with SAM2Base's prefixes and
/// modules we do not port): the heads take the official weights bit for bit, our encoder
/// keeps its own, and the run trains from there.
#[test]
fn init_from_an_official_checkpoint_loads_the_heads_and_trains() {
    use segburn_models::fixtures::fixture_path;
    use segburn_models::tensor_file::{read_safetensors, serialize_safetensors};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut official = NamedTensors::new();
    let mut heads = NamedTensors::new();
    for (file, prefix) in [
        ("prompt_encoder.safetensors", "sam_prompt_encoder."),
        ("mask_decoder.safetensors", "sam_mask_decoder."),
    ] {
        let path = fixture_path(&format!("sam2/{file}")).unwrap_or_else(|e| panic!("{e}"));
        let tensors = read_safetensors(&path).unwrap_or_else(|e| panic!("{e}"));
        for (key, value) in tensors {
            official.insert(format!("model.{prefix}{key}"), value.clone());
            heads.insert(format!("{prefix}{key}"), value);
        }
    }
    let hiera = "model.image_encoder.trunk.pos_embed";
    official.insert(
        hiera.into(),
        burn::tensor::TensorData::new(vec![0.5f32; 4], [1, 4]),
    );
    let path = dir.path().join("sam2.1_hiera_tiny (official).safetensors");
    let bytes = serialize_safetensors(&official, None, &path).expect("serialize");
    std::fs::write(&path, bytes).expect("write");

    let mut setup = tiny_setup(&dir.path().join("run"), 2);
    // The official head sizes.
    setup.model.transformer_dim = 256;
    setup.model.num_heads = 8;
    setup.model.mlp_dim = 2048;
    let mut trainer = Sam2Trainer::<A>::new(setup, Default::default()).expect("trainer");
    let encoder_before = import::export(trainer.model());
    let report = trainer
        .init_weights_from(&path)
        .expect("official checkpoint");
    assert_eq!(report.loaded.len(), heads.len(), "{report}");
    assert!(report.missing.is_empty(), "{report}");
    assert_eq!(report.unexpected, ["image_encoder.trunk.pos_embed"]);
    let loaded = import::export(trainer.model());
    for (key, value) in &heads {
        assert_eq!(
            loaded[key].as_bytes(),
            value.as_bytes(),
            "{key} is not the official tensor"
        );
    }
    for (key, value) in loaded
        .iter()
        .filter(|(k, _)| k.starts_with("image_encoder."))
    {
        assert_eq!(
            value, &encoder_before[key],
            "{key}: our encoder was changed"
        );
    }
    let summary = trainer.run(&mut quiet).expect("training");
    assert_eq!(summary.steps, 2);
}

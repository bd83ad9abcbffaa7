//! Checkpoints are portable across precisions, and official weights start a run.

mod common;

use common::tiny_setup;
use std::path::Path;

use burn::backend::{Autodiff, Flex};
use segburn_models::fixtures::fixture_path;
use segburn_models::pidnet::{pidnet_state_dict, read_pidnet_tensors};
use segburn_train::checkpoint::load_checkpoint;
use segburn_train::engine::Silent;
use segburn_train::mixed_precision::Precision;
use segburn_train::pidnet::{PidNetSetup, PidNetTrainer};

type AD = Autodiff<Flex>;

fn setup(run_dir: &Path, max_steps: u64, precision: Precision) -> PidNetSetup {
    tiny_setup(run_dir, |train| {
        train.epochs = 2;
        train.max_steps = Some(max_steps);
        train.precision = precision;
    })
}

#[test]
fn a_bf16_checkpoint_resumes_in_f32() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("bf16 → f32");
    let mut bf16 =
        PidNetTrainer::<AD>::new(setup(&dir, 1, Precision::Bf16), Default::default()).unwrap();
    bf16.run(&mut Silent).unwrap();
    let checkpoint = bf16.checkpoint_dir().latest().unwrap();
    // One trainer per run directory at a time.
    drop(bf16);
    let saved = load_checkpoint(&checkpoint).unwrap();
    assert!(saved
        .model
        .values()
        .all(|t| t.dtype == burn::tensor::DType::F32 || t.dtype == burn::tensor::DType::I64));

    let mut f32_run =
        PidNetTrainer::<AD>::new(setup(&dir, 2, Precision::F32), Default::default()).unwrap();
    f32_run.resume(&checkpoint).unwrap();
    let resumed = pidnet_state_dict(f32_run.model());
    for (key, value) in &saved.model {
        assert_eq!(
            value.as_bytes(),
            resumed[key].as_bytes(),
            "{key} changed on load"
        );
    }
    f32_run.run(&mut Silent).unwrap();
    assert_eq!(f32_run.state().step, 2);
}

#[test]
fn official_weights_initialise_a_run() {
    let root = tempfile::tempdir().unwrap();
    let mut trainer =
        PidNetTrainer::<AD>::new(setup(root.path(), 1, Precision::F32), Default::default())
            .unwrap();
    let official = fixture_path("pidnet_s/state_dict.safetensors").unwrap();
    let report = trainer.init_weights_from(&official).unwrap();
    assert_eq!(report.loaded.len(), 479, "{report}");
    let expected = read_pidnet_tensors(&official).unwrap();
    let ours = pidnet_state_dict(trainer.model());
    assert_eq!(
        ours["layer1.0.conv1.weight"].as_bytes(),
        expected["layer1.0.conv1.weight"].as_bytes()
    );
    assert_eq!(
        trainer.state().step,
        0,
        "weights only: the run starts at step 0"
    );
    trainer.run(&mut Silent).unwrap();
}

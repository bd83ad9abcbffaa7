//! The binaries on Burn's wgpu backend (`device: Wgpu(0)`; in CI Mesa's software Vulkan
//! `lavapipe`), at small sizes: PIDNet trains with gradient accumulation and its checkpoint
//! resumes on the CPU and back, evaluates and predicts on the GPU; f16 mixed precision with
//! dynamic loss scaling; SAM2 decoder training and a reduced Hiera fine-tuning step.
//!
//! Built only with `--features wgpu` (`.ci/run` runs it).
#![cfg(feature = "wgpu")]

mod common;

use std::path::{Path, PathBuf};

use common::{run, text, REDUCED_HIERA_EXPERIMENT};
use segburn::device::wgpu_probe::probe_wgpu;

const TRAIN: &str = env!("CARGO_BIN_EXE_train");
const EVAL: &str = env!("CARGO_BIN_EXE_eval");
const PREDICT: &str = env!("CARGO_BIN_EXE_predict");
const TRAIN_SAM2: &str = env!("CARGO_BIN_EXE_train-sam2");
const EVAL_SAM2: &str = env!("CARGO_BIN_EXE_eval-sam2");

/// A run folder whose path has spaces and non-ASCII characters.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("gpu runs é").join("运行");
    std::fs::create_dir_all(&dir).expect("scratch folder");
    (root, dir)
}

/// `--set` pairs for the quickstart at a size lavapipe runs in seconds.
fn quickstart(run_dir: &Path, device: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["configs/quickstart.ron".into(), "--quiet".into()];
    let run_dir = serde_json::to_string(&run_dir.display().to_string()).expect("json");
    let sets = [
        format!("device={device}"),
        "data.augment.base_size=128".into(),
        "data.augment.crop_height=64".into(),
        "data.augment.crop_width=64".into(),
        "loss.ohem.min_kept=100".into(),
        "data.train_loader.batch_size=2".into(),
        "train.grad_accum=2".into(),
        "train.log_every_steps=1".into(),
        "train.checkpoint_every_steps=1".into(),
        "train.validate_at_end=false".into(),
        format!("train.run_dir={run_dir}"),
    ];
    for set in sets.iter().map(String::as_str).chain(extra.iter().copied()) {
        args.extend(["--set".to_string(), set.to_string()]);
    }
    args
}

/// The (step, loss, loss scale) rows of a run's metrics.
fn train_rows(run_dir: &Path) -> Vec<(u64, f64, Option<f64>)> {
    std::fs::read_to_string(run_dir.join("metrics.jsonl"))
        .expect("metrics.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "train")
        .map(|v| {
            let loss = v["loss"].as_f64().unwrap_or(f64::NAN);
            (
                v["step"].as_u64().unwrap_or(0),
                loss,
                v["loss_scale"].as_f64(),
            )
        })
        .collect()
}

fn train(args: &[String]) -> String {
    let output = run(TRAIN, args);
    let message = text(&output);
    assert!(output.status.success(), "{message}");
    message
}

#[test]
fn pidnet_trains_on_wgpu_resumes_on_the_cpu_and_back_then_evaluates_and_predicts() {
    let (_root, run_dir) = scratch();
    let message = train(&quickstart(&run_dir, "Wgpu(0)", &["train.max_steps=2"]));
    assert!(message.contains("finished at step 2"), "{message}");
    // The same seed gives the same initial weights on the GPU as on the CPU (drawn on the host
    // and moved) and the batches are the same: the first losses differ only by f32 summation
    // order. Before the weights were drawn on the host, step 1 differed by 2 %.
    let cpu_dir = run_dir.with_file_name("cpu run");
    train(&quickstart(&cpu_dir, "Cpu", &["train.max_steps=1"]));
    let (gpu_first, cpu_first) = (train_rows(&run_dir)[0].1, train_rows(&cpu_dir)[0].1);
    let relative = (gpu_first - cpu_first).abs() / cpu_first.abs();
    println!("step 1 loss: wgpu {gpu_first}, CPU {cpu_first}, relative {relative:.1e}");
    assert!(
        relative <= 1e-4,
        "step 1 loss on wgpu {gpu_first} vs the CPU {cpu_first}: relative {relative:.1e}"
    );
    let message = train(
        &[
            quickstart(&run_dir, "Cpu", &["train.max_steps=3"]),
            vec!["--resume".into()],
        ]
        .concat(),
    );
    assert!(
        message.contains("at step 2") && message.contains("finished at step 3"),
        "{message}"
    );
    let message = train(
        &[
            quickstart(&run_dir, "Wgpu(0)", &["train.max_steps=4"]),
            vec!["--resume".into()],
        ]
        .concat(),
    );
    assert!(
        message.contains("at step 3") && message.contains("finished at step 4"),
        "{message}"
    );
    let rows = train_rows(&run_dir);
    let steps: Vec<u64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(steps, [1, 2, 3, 4], "{rows:?}");
    assert!(
        rows.iter().all(|r| r.1.is_finite() && r.1 > 0.0),
        "{rows:?}"
    );

    let checkpoint = run_dir
        .join("checkpoints")
        .join("step_00000004.safetensors");
    let checkpoint = checkpoint.to_str().expect("utf8").to_string();
    let out_dir = run_dir.join("eval");
    let output = run(
        EVAL,
        &[
            "configs/quickstart.ron",
            "--checkpoint",
            &checkpoint,
            "--out",
            out_dir.to_str().expect("utf8"),
            "--scales",
            "0.5",
            "--set",
            "device=Wgpu(0)",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("mIoU"), "{}", text(&output));

    let image =
        "datasets/sample/leftImg8bit/val/coldharbour/coldharbour_000000_000019_leftImg8bit.png";
    let predictions = run_dir.join("predictions");
    let output = run(
        PREDICT,
        &[
            "--checkpoint",
            &checkpoint,
            image,
            "--out",
            predictions.to_str().expect("utf8"),
            "--set",
            "device=Wgpu(0)",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let written = std::fs::read_dir(&predictions).map_or(0, |d| d.count());
    assert!(written >= 2, "{written} files in {}", predictions.display());
}

/// F16 with dynamic loss scaling where the adapter has 16-bit float shaders; a clear refusal
/// naming the precision where it has not.
#[test]
fn f16_mixed_precision_trains_on_wgpu_or_is_refused_clearly() {
    let adapters = probe_wgpu();
    let f16 = adapters.first().is_some_and(|a| a.shader_f16);
    let (_root, run_dir) = scratch();
    let args = quickstart(
        &run_dir,
        "Wgpu(0)",
        &["train.max_steps=2", "train.precision=F16"],
    );
    let output = run(TRAIN, &args);
    let message = text(&output);
    if !f16 {
        assert!(!output.status.success(), "{message}");
        assert!(message.contains("train.precision F16"), "{message}");
        return;
    }
    assert!(output.status.success(), "{message}");
    let rows = train_rows(&run_dir);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (step, loss, scale) in rows {
        assert!(loss.is_finite(), "step {step}: loss {loss}");
        assert!(
            scale.is_some_and(|s| s >= 1.0),
            "step {step}: loss scale {scale:?}"
        );
    }
}

/// Bf16 is not a wgpu shader type: refused before training, naming the device.
#[test]
fn bf16_on_wgpu_is_refused_before_training() {
    let (_root, run_dir) = scratch();
    let args = quickstart(
        &run_dir,
        "Wgpu(0)",
        &["train.max_steps=1", "train.precision=Bf16"],
    );
    let output = run(TRAIN, &args);
    let message = text(&output);
    assert!(!output.status.success(), "{message}");
    assert!(
        message.contains("train.precision Bf16") && message.contains("F32"),
        "{message}"
    );
}

/// The SAM2 heads train and evaluate on wgpu; the reduced Hiera model takes a fine-tuning step.
#[test]
fn sam2_decoder_and_a_reduced_hiera_train_on_wgpu() {
    let (_root, run_dir) = scratch();
    let set_run = format!("train.run_dir={}", run_dir.display());
    let args = [
        "configs/sam2_decoder.ron",
        "--quiet",
        "--set",
        &set_run,
        "--set",
        "device=Wgpu(0)",
        "--set",
        "train.max_steps=2",
        "--set",
        "train.validate_at_end=false",
    ];
    let output = run(TRAIN_SAM2, &args);
    assert!(output.status.success(), "{}", text(&output));
    let checkpoint = run_dir
        .join("checkpoints")
        .join("step_00000002.safetensors");
    assert!(checkpoint.is_file(), "{}", text(&output));
    let output = run(
        EVAL_SAM2,
        &[
            "configs/sam2_decoder.ron",
            "--checkpoint",
            checkpoint.to_str().expect("utf8"),
            "--corrections",
            "1",
            "--set",
            "device=Wgpu(0)",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("mean mask IoU"), "{}", text(&output));

    let hiera_dir = run_dir.join("hiera");
    let config = hiera_dir.join("hiera.ron");
    std::fs::create_dir_all(&hiera_dir).expect("folder");
    std::fs::write(&config, REDUCED_HIERA_EXPERIMENT).expect("config");
    let set_run = format!("train.run_dir={}", hiera_dir.join("run").display());
    let output = run(
        TRAIN_SAM2,
        &[
            config.to_str().expect("utf8"),
            "--quiet",
            "--set",
            &set_run,
            "--set",
            "device=Wgpu(0)",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("finished at step 1"),
        "{}",
        text(&output)
    );
}

//! `eval`, `predict` and `plot` driven like a user drives them, on a copy of the bundled sample
//! dataset in a folder whose path has spaces, an apostrophe and non-ASCII characters.
//!
//! The binaries are found with `CARGO_BIN_EXE_<name>`, which Cargo sets for the integration tests
//! of the package that owns the binaries (and builds them first): that is why these tests live
//! in `crates/cli/tests` rather than in the workspace's `tests/` crate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

fn run(binary: &str, args: &[&std::ffi::OsStr]) -> Output {
    Command::new(binary)
        .current_dir(workspace())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{binary} runs: {e}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn pngs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    files.sort();
    files
}

/// Trains a 2-step checkpoint on the copied sample, then evaluates and predicts with it.
#[test]
fn eval_predict_and_plot_on_a_trained_checkpoint() {
    let temp = tempfile::tempdir().unwrap();
    let scratch = temp.path().join("données d'essai").join("数据");
    let sample = scratch.join("sample");
    copy_tree(&workspace().join("datasets").join("sample"), &sample);
    let run_dir = scratch.join("run");
    let quickstart = std::fs::read_to_string(workspace().join("configs/quickstart.ron")).unwrap();
    let config_text = quickstart
        .replace(
            "\"datasets/sample\"",
            &format!("{:?}", sample.to_str().unwrap()),
        )
        .replace(
            "\"checkpoints/quickstart\"",
            &format!("{:?}", run_dir.to_str().unwrap()),
        );
    let config = scratch.join("expérience.ron");
    std::fs::write(&config, config_text).unwrap();

    // A checkpoint, validated at its end by the trainer.
    let out = run(
        env!("CARGO_BIN_EXE_train"),
        &[
            config.as_os_str(),
            "--set".as_ref(),
            "train.max_steps=2".as_ref(),
            "--quiet".as_ref(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        run_dir.join("curves.png").is_file(),
        "train draws curves.png at validation"
    );
    let checkpoint = run_dir
        .join("checkpoints")
        .join("step_00000002.safetensors");
    assert!(checkpoint.is_file());
    let metrics_log = std::fs::read_to_string(run_dir.join("metrics.jsonl")).unwrap();
    let validation: serde_json::Value = metrics_log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|row| row["kind"] == "val")
        .expect("a validation row");

    // eval == PidNetTrainer::validate on the same checkpoint (the same numbers, not just close),
    // reached through the run's `latest` pointer.
    let latest = run_dir.join("checkpoints").join("latest");
    let out = run(
        env!("CARGO_BIN_EXE_eval"),
        &[
            config.as_os_str(),
            "--checkpoint".as_ref(),
            latest.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("mIoU"), "{}", text(&out));
    let eval_dir = run_dir.join("eval");
    let report = json(&eval_dir.join("metrics.json"));
    assert_eq!(report["mean_iou"], validation["mean_iou"]);
    assert_eq!(report["pixel_accuracy"], validation["pixel_accuracy"]);
    let counted: u64 = report["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["gt_pixels"].as_u64().unwrap())
        .sum();
    assert_eq!(report["total_pixels"].as_u64(), Some(counted));
    assert!(counted > 0 && counted <= 12 * 256 * 512);
    for file in [
        "metrics.csv",
        "confusion.csv",
        "confusion.png",
        "settings.json",
    ] {
        assert!(eval_dir.join(file).is_file(), "{file}");
    }
    let settings = json(&eval_dir.join("settings.json"));
    assert_eq!(settings["checkpoint"].as_str(), checkpoint.to_str());

    // Evaluating twice gives identical files; the second time the checkpoint is named by its
    // run directory.
    let again = scratch.join("eval again");
    let out = run(
        env!("CARGO_BIN_EXE_eval"),
        &[
            config.as_os_str(),
            "--checkpoint".as_ref(),
            run_dir.as_os_str(),
            "--out".as_ref(),
            again.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    for file in ["metrics.json", "metrics.csv", "confusion.csv"] {
        assert_eq!(
            std::fs::read(eval_dir.join(file)).unwrap(),
            std::fs::read(again.join(file)).unwrap(),
            "{file} differs between two evaluations"
        );
    }
    let settings = json(&again.join("settings.json"));
    assert_eq!(settings["checkpoint"].as_str(), checkpoint.to_str());

    // Slide + flip with pictures, the checkpoint named by the run's `best` pointer (the
    // validation at the end marked it).
    let slid = scratch.join("slide flip");
    let best = run_dir.join("checkpoints").join("best");
    let out = run(
        env!("CARGO_BIN_EXE_eval"),
        &[
            config.as_os_str(),
            "--checkpoint".as_ref(),
            best.as_os_str(),
            "--mode".as_ref(),
            "slide".as_ref(),
            "--crop".as_ref(),
            "256,256".as_ref(),
            "--stride".as_ref(),
            "128,128".as_ref(),
            "--flip".as_ref(),
            "--save-predictions".as_ref(),
            "--out".as_ref(),
            slid.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let settings = json(&slid.join("settings.json"));
    assert_eq!(settings["inference"]["flip"], true);
    assert_eq!(settings["checkpoint"].as_str(), checkpoint.to_str());
    for folder in ["train_ids", "label_ids", "colour", "overlay"] {
        let files = pngs(&slid.join("predictions").join(folder));
        assert_eq!(files.len(), 12, "{folder}");
        let picture = image::open(&files[0]).unwrap();
        assert_eq!((picture.width(), picture.height()), (512, 256), "{folder}");
    }
    let label_ids = image::open(&pngs(&slid.join("predictions/label_ids"))[0])
        .unwrap()
        .into_luma8();
    let valid = [
        7u8, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33,
    ];
    assert!(label_ids.pixels().all(|p| valid.contains(&p.0[0])));

    // predict: a folder with two good images (one of a size that is not a multiple of 8) and a
    // corrupt one; the good ones are predicted, the bad one named, the exit code non-zero. The
    // checkpoint is given as the run directory (its newest checkpoint and embedded experiment).
    let inputs = scratch.join("à prédire");
    std::fs::create_dir_all(&inputs).unwrap();
    let val_images = pngs(&sample.join("leftImg8bit/val/coldharbour"));
    std::fs::copy(&val_images[0], inputs.join("rue 1.png")).unwrap();
    let odd = image::open(&val_images[1])
        .unwrap()
        .crop_imm(0, 0, 150, 100);
    odd.to_rgb8().save(inputs.join("odd size.jpg")).unwrap();
    std::fs::write(inputs.join("broken.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let predictions = scratch.join("prédictions");
    let out = run(
        env!("CARGO_BIN_EXE_predict"),
        &[
            "--checkpoint".as_ref(),
            run_dir.as_os_str(),
            inputs.as_os_str(),
            "--out".as_ref(),
            predictions.as_os_str(),
        ],
    );
    assert!(
        !out.status.success(),
        "a corrupt input fails the run:\n{}",
        text(&out)
    );
    let message = text(&out);
    assert!(
        message.contains("broken.png") && message.contains("1 input(s)"),
        "{message}"
    );
    assert!(message.contains("2 image(s) predicted"), "{message}");
    for folder in ["colour", "overlay", "train_ids", "label_ids"] {
        let names: Vec<String> = pngs(&predictions.join(folder))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["odd size.png", "rue 1.png"], "{folder}");
    }
    let odd_mask = image::open(predictions.join("train_ids/odd size.png")).unwrap();
    assert_eq!((odd_mask.width(), odd_mask.height()), (150, 100));

    // The other forms of the checkpoint argument name the same checkpoint: the same mask.
    let checkpoints = run_dir.join("checkpoints");
    for form in [
        checkpoint.clone(),
        checkpoints.join("latest"),
        checkpoints.join("best"),
        checkpoints.clone(),
    ] {
        let out_dir = scratch.join("forme");
        let out = run(
            env!("CARGO_BIN_EXE_predict"),
            &[
                "--checkpoint".as_ref(),
                form.as_os_str(),
                inputs.join("odd size.jpg").as_os_str(),
                "--out".as_ref(),
                out_dir.as_os_str(),
            ],
        );
        assert!(out.status.success(), "{}: {}", form.display(), text(&out));
        assert_eq!(
            std::fs::read(out_dir.join("train_ids/odd size.png")).unwrap(),
            std::fs::read(predictions.join("train_ids/odd size.png")).unwrap(),
            "{}",
            form.display()
        );
    }

    // plot redraws the curves.
    std::fs::remove_file(run_dir.join("curves.png")).unwrap();
    let out = run(env!("CARGO_BIN_EXE_plot"), &[run_dir.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(run_dir.join("curves.png").is_file());
}

#[test]
fn unusable_inputs_are_named() {
    let temp = tempfile::tempdir().unwrap();
    let missing = temp.path().join("nowhere é.safetensors");
    let out = run(
        env!("CARGO_BIN_EXE_eval"),
        &[
            "configs/quickstart.ron".as_ref(),
            "--checkpoint".as_ref(),
            missing.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("nowhere é.safetensors"),
        "{}",
        text(&out)
    );

    let official = temp.path().join("PIDNet_S_Cityscapes_val.pt");
    std::fs::write(&official, b"not a pickle").unwrap();
    let out = run(
        env!("CARGO_BIN_EXE_predict"),
        &[
            "--checkpoint".as_ref(),
            official.as_os_str(),
            temp.path().as_os_str(),
            "--out".as_ref(),
            temp.path().as_os_str(),
        ],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("--config"), "{}", text(&out));

    let out = run(
        env!("CARGO_BIN_EXE_eval"),
        &[
            "configs/quickstart.ron".as_ref(),
            "--checkpoint".as_ref(),
            official.as_os_str(),
            "--mode".as_ref(),
            "slide".as_ref(),
        ],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("--crop"), "{}", text(&out));

    let out = run(env!("CARGO_BIN_EXE_plot"), &[temp.path().as_os_str()]);
    assert!(!out.status.success());
    assert!(text(&out).contains("metrics.jsonl"), "{}", text(&out));
}

/// A state dict under the official PIDNet-S key names (the fixtures' formula weights, as
/// `.safetensors`) evaluates directly, with the same numbers on a second run. (The `.pt` reader
/// is checked against the same tensors in `crates/models/tests/pidnet_import.rs`: a full
/// 31 MB `.pt` is not stored in the repository.)
#[test]
fn official_weights_evaluate_directly() {
    let weights = segburn_models::fixtures::fixture_path("pidnet_s/state_dict.safetensors")
        .unwrap_or_else(|e| panic!("{e}"));
    let temp = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    for run_name in ["first run", "second run"] {
        let out_dir = temp.path().join(run_name);
        let out = run(
            env!("CARGO_BIN_EXE_eval"),
            &[
                "configs/quickstart.ron".as_ref(),
                "--checkpoint".as_ref(),
                weights.as_os_str(),
                "--out".as_ref(),
                out_dir.as_os_str(),
                "--quiet".as_ref(),
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
        reports.push(std::fs::read(out_dir.join("metrics.json")).unwrap());
    }
    assert_eq!(reports[0], reports[1]);
}

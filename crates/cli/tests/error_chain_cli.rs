//! Every binary prints a failed I/O operation as one `error:` paragraph that names the operating
//! system's cause once (`Is a directory (os error 21)`, not `…: Is a directory (os error 21):
//! Is a directory (os error 21)`). Each case fails before any heavy work. `eval-sam2` and
//! `predict-sam2` need a trained SAM2 checkpoint: their cases are in
//! `sam2_train_eval_predict_cli.rs`.

mod common;

use std::path::Path;

use common::{assert_fails_naming_once, official_pidnet_weights, run};

const IS_A_DIRECTORY: &str = "Is a directory (os error 21)";
const NOT_A_DIRECTORY: &str = "Not a directory (os error 20)";

/// A run directory whose `train.log` is a folder: the run log cannot be opened.
fn run_dir_with_a_blocked_log(root: &Path) -> String {
    let run_dir = root.join("données d'essai").join("run");
    std::fs::create_dir_all(run_dir.join("train.log")).unwrap();
    format!("train.run_dir={}", run_dir.display())
}

#[test]
fn train_and_train_sam2_name_the_cause_once() {
    let temp = tempfile::tempdir().unwrap();
    let set_run = run_dir_with_a_blocked_log(temp.path());
    for (binary, config) in [
        (env!("CARGO_BIN_EXE_train"), "configs/quickstart.ron"),
        (env!("CARGO_BIN_EXE_train-sam2"), "configs/sam2_decoder.ron"),
    ] {
        let out = run(binary, &[config, "--quiet", "--set", &set_run]);
        assert_fails_naming_once(&out, IS_A_DIRECTORY);
        assert!(common::text(&out).contains("données d'essai"));
    }
}

#[test]
fn eval_and_predict_name_the_cause_once() {
    let temp = tempfile::tempdir().unwrap();
    let weights = official_pidnet_weights();
    // `predictions` is a file, so its picture folders cannot be created.
    let out_dir = temp.path().join("sortie é");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("predictions"), b"").unwrap();
    let out = run(
        env!("CARGO_BIN_EXE_eval"),
        &[
            "configs/quickstart.ron".as_ref(),
            "--checkpoint".as_ref(),
            weights.as_os_str(),
            "--save-predictions".as_ref(),
            "--out".as_ref(),
            out_dir.as_os_str(),
            "--quiet".as_ref(),
        ],
    );
    assert_fails_naming_once(&out, NOT_A_DIRECTORY);

    let image =
        "datasets/sample/leftImg8bit/val/coldharbour/coldharbour_000000_000019_leftImg8bit.png";
    let out = run(
        env!("CARGO_BIN_EXE_predict"),
        &[
            "--checkpoint".as_ref(),
            weights.as_os_str(),
            "--config".as_ref(),
            "configs/quickstart.ron".as_ref(),
            image.as_ref(),
            "--out".as_ref(),
            out_dir.join("predictions").as_os_str(),
        ],
    );
    assert_fails_naming_once(&out, NOT_A_DIRECTORY);
}

#[test]
fn plot_doctor_and_bench_name_the_cause_once() {
    let temp = tempfile::tempdir().unwrap();
    let run_dir = temp.path().join("run é");
    std::fs::create_dir_all(run_dir.join("metrics.jsonl")).unwrap();
    let out = run(env!("CARGO_BIN_EXE_plot"), &[&run_dir]);
    assert_fails_naming_once(&out, IS_A_DIRECTORY);

    let folder = temp.path().as_os_str();
    let out = run(
        env!("CARGO_BIN_EXE_doctor"),
        &["--skip-kernels".as_ref(), "--json".as_ref(), folder],
    );
    assert_eq!(out.status.code(), Some(2), "{}", common::text(&out));
    assert_fails_naming_once(&out, IS_A_DIRECTORY);

    let out = run(
        env!("CARGO_BIN_EXE_bench"),
        &["--smoke".as_ref(), "--compare".as_ref(), folder],
    );
    assert_fails_naming_once(&out, IS_A_DIRECTORY);
}

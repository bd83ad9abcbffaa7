//! The `doctor` binary as CI runs it (CPU only): it exits 0 and says CUDA is unavailable; an
//! experiment that needs what is missing makes it exit 1 with the fix named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

fn doctor(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_doctor"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the doctor binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn cuda_usable_here() -> bool {
    cfg!(feature = "cuda") && segburn::device::cuda_probe::probe_cuda().usable()
}

#[test]
fn doctor_passes_on_a_cpu_machine_and_says_cuda_is_unavailable() {
    let output = doctor(&workspace(), &[]);
    let text = stdout(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "System",
        "CPU threads",
        "compiled backends",
        "cpu conv2d",
        "cpu backward",
        "checkpoint save speed",
        "non-ASCII path",
    ] {
        assert!(text.contains(line), "missing `{line}` in:\n{text}");
    }
    if !cuda_usable_here() {
        // The verdict line: the name column is padded, so "CUDA" is followed by spaces.
        let cuda = text
            .lines()
            .find(|l| l.contains("] CUDA  "))
            .expect("a CUDA verdict line");
        assert!(cuda.contains("unavailable"), "{cuda}");
        assert!(
            text.contains("--set device=Cpu"),
            "the CPU fallback is named"
        );
    }
    assert!(text.contains("Everything needed works"));
    assert!(text.find("System").unwrap() < text.find("Backends").unwrap());
    assert!(text.find("Backends").unwrap() < text.find("Kernel sanity check").unwrap());
}

#[test]
fn an_experiment_that_needs_a_missing_gpu_fails_with_the_fix() {
    if cuda_usable_here() {
        return;
    }
    let output = doctor(
        &workspace(),
        &[
            "configs/quickstart.ron",
            "--set",
            r#"device={"Cuda":0}"#,
            "--skip-kernels",
        ],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("[FAIL] CUDA  "), "{text}");
    assert!(!text.contains("[FAIL] experiment"), "{text}");
    assert!(text.contains("Start with:"));
}

#[test]
fn the_quickstart_experiment_passes_and_the_json_report_is_written() {
    let temp = tempfile::tempdir().unwrap();
    let json = temp.path().join("doctor report é.json");
    let output = doctor(
        &workspace(),
        &[
            "configs/quickstart.ron",
            "--skip-kernels",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let checks = report["checks"].as_array().unwrap();
    assert!(checks
        .iter()
        .any(|c| c["name"] == "experiment" && c["status"] == "Ok"));
    assert!(checks.iter().any(|c| c["name"] == "dataset folder"
        && c["detail"].as_str().unwrap().contains("datasets/sample")));
}

#[test]
fn missing_folders_outside_an_experiment_are_warnings_not_failures() {
    let temp = tempfile::tempdir().unwrap();
    let output = doctor(temp.path(), &["--skip-kernels"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("[WARN] dataset folder"), "{text}");
    assert!(text.contains("will be created"), "{text}");
    assert_eq!(
        std::fs::read_dir(temp.path()).unwrap().count(),
        0,
        "doctor leaves nothing behind"
    );
}

#[test]
fn rayon_num_threads_sizes_the_compute_pool_and_doctor_says_so() {
    let output = Command::new(env!("CARGO_BIN_EXE_doctor"))
        .current_dir(workspace())
        .env("RAYON_NUM_THREADS", "3")
        .arg("--skip-kernels")
        .output()
        .expect("the doctor binary runs");
    let text = stdout(&output);
    let line = text
        .lines()
        .find(|l| l.contains("compute threads"))
        .unwrap_or_else(|| panic!("no compute threads line in:\n{text}"));
    assert!(
        line.contains("3 compute threads on") && line.contains("set by RAYON_NUM_THREADS"),
        "{line}"
    );
}

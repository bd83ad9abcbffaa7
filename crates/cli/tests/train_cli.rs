//! The `train` binary driven like a user drives it: the quickstart trains and its loss falls,
//! bad configurations fail with one clear paragraph, and a run killed (SIGKILL) in the middle
//! of writing a checkpoint resumes from the previous one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

fn train(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train"))
        .current_dir(workspace())
        .args(args)
        .output()
        .expect("the train binary runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A scratch directory whose name has spaces and non-ASCII characters.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("données d'essai").join("数据");
    std::fs::create_dir_all(&dir).unwrap();
    (root, dir)
}

/// Settings that make the quickstart small enough for the test suite.
fn tiny(run_dir: &Path, crop: usize) -> Vec<String> {
    [
        "data.augment.base_size=256".to_string(),
        format!("data.augment.crop_height={crop}"),
        format!("data.augment.crop_width={crop}"),
        "loss.ohem.min_kept=1000".into(),
        "train.log_every_steps=1".into(),
        format!(
            "train.run_dir={}",
            serde_json::to_string(&run_dir.display().to_string()).unwrap()
        ),
    ]
    .into_iter()
    .flat_map(|s| ["--set".to_string(), s])
    .collect()
}

fn losses(run_dir: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(run_dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "train")
        .map(|v| (v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap()))
        .collect()
}

#[test]
fn quickstart_trains_and_its_loss_falls() {
    let (_root, run_dir) = scratch();
    let mut args: Vec<String> = [
        "configs/quickstart.ron",
        "--quiet",
        "--set",
        "train.max_steps=12",
    ]
    .map(String::from)
    .to_vec();
    args.extend(tiny(&run_dir, 128));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = train(&args);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("validation mIoU"),
        "{}",
        text(&output)
    );
    let losses = losses(&run_dir);
    assert_eq!(losses.len(), 12);
    let first: f64 = losses[..3].iter().map(|(_, l)| l).sum::<f64>() / 3.0;
    let last: f64 = losses[9..].iter().map(|(_, l)| l).sum::<f64>() / 3.0;
    assert!(
        last < first * 0.8,
        "loss did not fall: first steps {first:.3}, last steps {last:.3}"
    );
    assert!(run_dir.join("train.log").exists());
    assert!(run_dir.join("metrics.csv").exists());
    assert!(run_dir.join("checkpoints").join("latest").exists());
}

fn assert_clean_failure(output: &Output, expected: &[&str]) {
    let all = text(output);
    assert!(!output.status.success(), "expected a failure:\n{all}");
    assert!(
        !all.contains("panicked") && !all.contains("RUST_BACKTRACE"),
        "a panic:\n{all}"
    );
    for needle in expected {
        assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
    }
}

#[test]
fn bad_configurations_fail_with_a_clear_message() {
    let (_root, dir) = scratch();
    let write = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        path.display().to_string()
    };
    let unknown = write(
        "unknown field.ron",
        "(\n  train: (lr: 0.01, batch_sise: 3),\n)\n",
    );
    assert_clean_failure(
        &train(&[&unknown]),
        &["unknown field.ron:2:", "batch_sise", "valid fields"],
    );

    let typo = write("typo.ron", "(train: (epoch: 3))");
    assert_clean_failure(&train(&[&typo]), &["did you mean `epochs`?"]);

    let wrong_type = write("wrong type.ron", "(train: (lr: \"fast\"))");
    assert_clean_failure(&train(&[&wrong_type]), &["wrong type.ron:1:"]);

    let negative = write("negative.ron", "(train: (lr: -0.1))");
    assert_clean_failure(&train(&[&negative]), &["train.lr", "positive"]);

    assert_clean_failure(
        &train(&[
            "configs/quickstart.ron",
            "--set",
            "data.train_loader.batch_size=0",
        ]),
        &["batch_size"],
    );
    assert_clean_failure(
        &train(&[&dir.join("missing.ron").display().to_string()]),
        &["missing.ron"],
    );

    let no_data = write(
        "no data.ron",
        &format!(
            "(data: (layout: Cityscapes(root: {:?})))",
            dir.join("nowhere").display().to_string()
        ),
    );
    assert_clean_failure(
        &train(&[&no_data]),
        &["nowhere", "datasets/README.md", "quickstart"],
    );
}

#[cfg(unix)]
#[test]
fn killed_while_saving_resumes_from_the_previous_checkpoint() {
    let (_root, run_dir) = scratch();
    let checkpoints = run_dir.join("checkpoints");
    let mut args: Vec<String> = [
        "configs/quickstart.ron",
        "--quiet",
        "--set",
        "train.max_steps=6",
        "--set",
        "train.checkpoint_every_steps=1",
        "--set",
        "train.validate_at_end=false",
    ]
    .map(String::from)
    .to_vec();
    args.extend(tiny(&run_dir, 64));
    let mut child = Command::new(env!("CARGO_BIN_EXE_train"))
        .current_dir(workspace())
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the second save to start writing (its temporary file appears), then SIGKILL.
    let started = Instant::now();
    let partial = checkpoints.join(".step_00000002.safetensors.partial");
    while !partial.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no second checkpoint was started"
        );
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            panic!(
                "training ended before it could be killed: {}",
                text(&output)
            );
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let latest = std::fs::read_to_string(checkpoints.join("latest")).unwrap();
    assert_eq!(
        latest.trim(),
        "step_00000001.safetensors",
        "the pointer still names the previous checkpoint"
    );
    segburn_train::checkpoint::load_checkpoint(&checkpoints.join(latest.trim()))
        .expect("the previous checkpoint loads");

    let mut resume_args = args.clone();
    resume_args.push("--resume".into());
    let resume_args: Vec<&str> = resume_args.iter().map(String::as_str).collect();
    let output = train(&resume_args);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("finished at step 6"),
        "{}",
        text(&output)
    );
    assert!(
        !partial.exists(),
        "the interrupted save's temporary file was cleaned up"
    );
}

/// The data-parallel path from the command line: two CPU replicas train, and their checkpoint
/// resumes on one device only with the same number of micro-batches per step.
#[test]
fn a_two_replica_run_resumes_on_one_device_with_twice_the_accumulation() {
    let (_root, run_dir) = scratch();
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = ["configs/quickstart.ron", "--quiet"]
            .map(String::from)
            .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(tiny(&run_dir, 64));
        args.extend(["--set".into(), "train.validate_at_end=false".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        train(&args)
    };
    let output = run(&[
        "--set",
        "device=CpuReplicas(2)",
        "--set",
        "train.max_steps=2",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let log = std::fs::read_to_string(run_dir.join("train.log")).unwrap();
    assert!(
        log.contains("on each of 2 device(s) as data-parallel replicas"),
        "{log}"
    );

    // One device with grad_accum 1 would read the loader position in the wrong unit.
    let refused = run(&[
        "--resume",
        "--set",
        "device=Cpu",
        "--set",
        "train.max_steps=3",
    ]);
    assert_clean_failure(&refused, &["micro-batches per step", "2 -> 1"]);

    let output = run(&[
        "--resume",
        "--set",
        "device=Cpu",
        "--set",
        "train.grad_accum=2",
        "--set",
        "train.max_steps=3",
    ]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("resuming with these changes"), "{all}");
    assert!(all.contains("finished at step 3"), "{all}");
    let steps: Vec<u64> = losses(&run_dir).iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, [1, 2, 3]);
}

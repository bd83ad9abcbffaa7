//! `train` interrupted like a user interrupts it: Ctrl-C (SIGINT) finishes the step, saves,
//! prints how to continue and exits with 75, and the continued run ends bit-identical to an
//! uninterrupted one; a second Ctrl-C aborts at once (130); a second `train` on a run
//! directory in use is refused with the holder's process id.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use segburn::commands::interrupt::{ABORTED_EXIT_CODE, STOPPED_EXIT_CODE};
use segburn_train::checkpoint::load_checkpoint;

mod common;
use common::{text, workspace};

/// The quickstart, small: `crop`-pixel crops, no validation, `max_steps` steps.
fn args(run_dir: &Path, crop: usize, max_steps: u64) -> Vec<String> {
    let sets = [
        "data.augment.base_size=256".to_string(),
        format!("data.augment.crop_height={crop}"),
        format!("data.augment.crop_width={crop}"),
        "loss.ohem.min_kept=1000".into(),
        "train.log_every_steps=1".into(),
        "train.validate_at_end=false".into(),
        format!("train.max_steps={max_steps}"),
        format!(
            "train.run_dir={}",
            serde_json::to_string(&run_dir.display().to_string()).unwrap()
        ),
    ];
    let mut args = vec!["configs/quickstart.ron".to_string(), "--quiet".to_string()];
    args.extend(sets.into_iter().flat_map(|s| ["--set".to_string(), s]));
    args
}

fn train(args: &[String]) -> Output {
    common::run(env!("CARGO_BIN_EXE_train"), args)
}

/// A running `train` whose output lines (stdout and stderr) arrive on a channel.
struct Running {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[String]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_train"))
            .current_dir(workspace())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, lines) = channel();
        let streams: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        ];
        for stream in streams {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = sender.send(line);
                }
            });
        }
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `pattern`.
    fn wait_for(&mut self, pattern: &str) {
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let found = line.contains(pattern);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) if self.child.try_wait().unwrap().is_some() => break,
                Err(_) => {}
            }
        }
        panic!("no line with `{pattern}`:\n{}", self.seen.join("\n"));
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the exit; returns the exit code and every line printed.
    fn finish(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        // The readers end with the pipes.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        (status.code(), self.seen.join("\n"))
    }
}

fn tensors_of(path: &Path) -> Vec<(String, Vec<u8>)> {
    let checkpoint = load_checkpoint(path).unwrap();
    let mut all: Vec<(String, Vec<u8>)> = checkpoint
        .model
        .iter()
        .chain(&checkpoint.optimizer)
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    all.sort();
    all
}

#[test]
fn ctrl_c_saves_and_the_continued_run_equals_an_uninterrupted_one() {
    let root = tempfile::tempdir().unwrap();
    let run_dir = root.path().join("interrompu l'été").join("数据");
    let mut running = Running::start(&args(&run_dir, 64, 40));
    running.wait_for("step 2/");
    running.signal("INT");
    let (code, output) = running.finish();
    assert_eq!(code, Some(STOPPED_EXIT_CODE), "{output}");
    assert!(output.contains("continue with: "), "{output}");
    assert!(output.contains("--resume"), "{output}");
    let step = load_checkpoint(
        &run_dir.join("checkpoints").join(
            std::fs::read_to_string(run_dir.join("checkpoints").join("latest"))
                .unwrap()
                .trim(),
        ),
    )
    .unwrap()
    .meta
    .state
    .step;
    assert!(
        (2..40).contains(&step),
        "stopped after the step in progress: {step}\n{output}"
    );

    let end = step + 1;
    let mut resume = args(&run_dir, 64, end);
    resume.push("--resume".into());
    let output = train(&resume);
    assert!(output.status.success(), "{}", text(&output));
    let straight_dir = root.path().join("straight");
    let output = train(&args(&straight_dir, 64, end));
    assert!(output.status.success(), "{}", text(&output));

    let file = format!("step_{end:08}.safetensors");
    let resumed = tensors_of(&run_dir.join("checkpoints").join(&file));
    let straight = tensors_of(&straight_dir.join("checkpoints").join(&file));
    assert_eq!(resumed.len(), straight.len());
    let differing: Vec<&String> = resumed
        .iter()
        .zip(&straight)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| &a.0)
        .collect();
    assert!(
        differing.is_empty(),
        "differ after the resume: {differing:?}"
    );
}

#[test]
fn a_second_run_in_the_same_directory_is_refused_and_a_second_ctrl_c_aborts() {
    let root = tempfile::tempdir().unwrap();
    let run_dir = root.path().join("occupé");
    let run = args(&run_dir, 128, 40);
    let mut running = Running::start(&run);
    running.wait_for("step 1/");

    let second = train(&run);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let holder = format!("process {}, started ", running.child.id());
    assert!(
        text(&second).contains("in use by another training run") && text(&second).contains(&holder),
        "{}",
        text(&second)
    );

    running.signal("INT");
    running.wait_for("interrupt: finishing the current step");
    running.signal("INT");
    let (code, output) = running.finish();
    assert_eq!(code, Some(ABORTED_EXIT_CODE), "{output}");
    assert!(output.contains("interrupt: aborted"), "{output}");
    assert!(!output.contains("continue with"), "{output}");
}

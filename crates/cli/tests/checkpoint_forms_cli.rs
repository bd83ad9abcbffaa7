//! Every command that takes a checkpoint refuses the same wrong forms with the same clear
//! message, naming the path: a folder that is not a run, a run without checkpoints, a missing
//! file, a `best` pointer the run has not written yet, a pointer to a deleted checkpoint.
//! (The forms that work are exercised with trained runs in `eval_predict_cli.rs` and
//! `sam2_train_eval_predict_cli.rs`.)

mod common;

use std::path::{Path, PathBuf};

use common::{run, text};

const IMAGE: &str =
    "datasets/sample/leftImg8bit/val/coldharbour/coldharbour_000000_000019_leftImg8bit.png";

/// Each command with its arguments, `{}` standing for the checkpoint argument.
fn commands(scratch: &Path) -> Vec<(&'static str, Vec<String>)> {
    let out = scratch.join("out").display().to_string();
    let set_run = format!("train.run_dir={}", scratch.join("new run").display());
    let set_embeddings = format!(
        "data.embeddings=Some(\"{}\")",
        scratch.join("emb").join("{split}").display()
    );
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (
            env!("CARGO_BIN_EXE_eval"),
            args(&["configs/quickstart.ron", "--checkpoint", "{}", "--quiet"]),
        ),
        (
            env!("CARGO_BIN_EXE_predict"),
            args(&["--checkpoint", "{}", IMAGE, "--out", &out]),
        ),
        (
            env!("CARGO_BIN_EXE_eval-sam2"),
            args(&["configs/sam2_decoder.ron", "--checkpoint", "{}"]),
        ),
        (
            env!("CARGO_BIN_EXE_predict-sam2"),
            args(&[
                "--checkpoint",
                "{}",
                IMAGE,
                "--points",
                "10,10,1",
                "--out",
                &out,
            ]),
        ),
        (
            env!("CARGO_BIN_EXE_train"),
            args(&[
                "configs/quickstart.ron",
                "--quiet",
                "--set",
                &set_run,
                "--init-from",
                "{}",
            ]),
        ),
        (
            env!("CARGO_BIN_EXE_train-sam2"),
            args(&[
                "configs/sam2_decoder.ron",
                "--quiet",
                "--set",
                &set_run,
                "--resume",
                "{}",
            ]),
        ),
        (
            env!("CARGO_BIN_EXE_train-sam2"),
            args(&[
                "configs/sam2_cached.ron",
                "--set",
                &set_embeddings,
                "--write-embeddings",
                "--encoder",
                "{}",
            ]),
        ),
    ]
}

/// A run directory whose `checkpoints/latest` names a deleted file.
fn run_with_a_dangling_pointer(scratch: &Path) -> PathBuf {
    let run = scratch.join("old run");
    std::fs::create_dir_all(run.join("checkpoints")).unwrap();
    std::fs::write(
        run.join("checkpoints").join("latest"),
        "step_00000040.safetensors\n",
    )
    .unwrap();
    run
}

#[test]
fn wrong_forms_are_refused_by_every_command() {
    let temp = tempfile::tempdir().unwrap();
    let scratch = temp.path().join("données d'essai");
    let photos = scratch.join("photos");
    std::fs::create_dir_all(&photos).unwrap();
    let empty_run = scratch.join("empty run");
    std::fs::create_dir_all(empty_run.join("checkpoints")).unwrap();
    let old_run = run_with_a_dangling_pointer(&scratch);
    let cases: [(PathBuf, &[&str]); 5] = [
        (photos.clone(), &["photos", "neither a run directory"]),
        (empty_run.clone(), &["empty run", "no checkpoint in"]),
        (
            scratch.join("nowhere é.safetensors"),
            &["nowhere é.safetensors", "does not exist"],
        ),
        (
            empty_run.join("checkpoints").join("best"),
            &["best does not exist", "has not yet"],
        ),
        (
            old_run.join("checkpoints").join("latest"),
            &["step_00000040.safetensors, which does not exist"],
        ),
    ];
    for (binary, args) in commands(&scratch) {
        let name = Path::new(binary)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for (checkpoint, expected) in &cases {
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace("{}", checkpoint.to_str().unwrap()))
                .collect();
            let out = run(binary, &args);
            let message = text(&out);
            assert!(!out.status.success(), "{name} {args:?}: {message}");
            for part in *expected {
                assert!(
                    message.contains(part),
                    "{name}: `{part}` missing:\n{message}"
                );
            }
        }
    }
}

//! Which checkpoint `--resume` continues from. Given a file, that file, verified (a corrupt
//! file the user named is an error, never silently replaced). Given none, the run's
//! checkpoints newest first (the `latest` pointer's file, then the step files by descending
//! step), each verified in turn; the first that verifies wins, and every one skipped is
//! reported with the reason.

use std::path::{Path, PathBuf};

use super::file::{load_checkpoint, Checkpoint, CheckpointError};
use super::run_files::{CheckpointDir, LATEST};

/// A checkpoint passed over, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedCheckpoint {
    pub path: PathBuf,
    pub reason: String,
}

/// The checkpoint a resume continues from.
#[derive(Debug)]
pub struct ResumeChoice {
    pub checkpoint: Checkpoint,
    /// Newer candidates that did not verify, newest first.
    pub skipped: Vec<SkippedCheckpoint>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("--resume: {0}")]
    Named(CheckpointError),
    #[error("--resume: no checkpoint in {dir} (train without --resume to start the run)")]
    NoneSaved { dir: PathBuf },
    #[error(
        "--resume: no checkpoint in {dir} verifies:\n{}\nstart the run afresh (without \
         --resume), or pass a checkpoint file from elsewhere with --resume FILE",
        list_skipped(.skipped)
    )]
    NoneVerifies {
        dir: PathBuf,
        skipped: Vec<SkippedCheckpoint>,
    },
}

/// `  path: reason` lines.
pub fn list_skipped(skipped: &[SkippedCheckpoint]) -> String {
    skipped
        .iter()
        .map(|s| format!("  {}: {}", s.path.display(), s.reason))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An error's text without its leading path (the list shows the path already).
fn without_path(message: &str, path: &Path) -> String {
    let shown = path.display().to_string();
    message
        .strip_prefix(&shown)
        .map_or(message, |rest| rest.trim_start_matches(':').trim_start())
        .to_string()
}

/// The checkpoint to resume from: `named`, or the newest of `dir` that verifies.
pub fn choose_resume_checkpoint(
    dir: &CheckpointDir,
    named: Option<&Path>,
) -> Result<ResumeChoice, ResumeError> {
    if let Some(path) = named {
        let checkpoint = load_checkpoint(path).map_err(ResumeError::Named)?;
        return Ok(ResumeChoice {
            checkpoint,
            skipped: Vec::new(),
        });
    }
    let mut skipped = Vec::new();
    let mut candidates: Vec<PathBuf> = dir.list().into_iter().rev().map(|(_, p)| p).collect();
    if let Some(pointed) = dir.pointer_target(LATEST) {
        candidates.retain(|p| p != &pointed);
        if pointed.exists() {
            candidates.insert(0, pointed);
        } else {
            skipped.push(SkippedCheckpoint {
                reason: format!(
                    "the `{LATEST}` pointer names it, but it does not exist (deleted?)"
                ),
                path: pointed,
            });
        }
    }
    for path in candidates {
        match load_checkpoint(&path) {
            Ok(checkpoint) => {
                return Ok(ResumeChoice {
                    checkpoint,
                    skipped,
                })
            }
            Err(error) => skipped.push(SkippedCheckpoint {
                reason: without_path(&error.to_string(), &path),
                path,
            }),
        }
    }
    let dir = dir.path().to_path_buf();
    match skipped.is_empty() {
        true => Err(ResumeError::NoneSaved { dir }),
        false => Err(ResumeError::NoneVerifies { dir, skipped }),
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;
    use segburn_models::tensor_file::NamedTensors;

    use super::*;
    use crate::checkpoint::train_state::state_at_step;
    use crate::checkpoint::Retention;

    /// A run directory with tiny checkpoints of steps 1..=`steps`.
    fn run_with_steps(root: &Path, steps: u64) -> CheckpointDir {
        let dir = CheckpointDir::new(root.join("run été").join("checkpoints"));
        std::fs::create_dir_all(root.join("run été")).unwrap();
        let model = NamedTensors::from([(
            "conv.weight".to_string(),
            TensorData::new(vec![1.0f32, 2.0], [2]),
        )]);
        for step in 1..=steps {
            let state = state_at_step(step);
            let keep_all = Retention {
                keep_last: 10,
                keep_best: false,
            };
            dir.save_step(&state, "()", &model, &NamedTensors::new(), &keep_all)
                .unwrap();
        }
        dir
    }

    fn truncate(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
    }

    #[test]
    fn a_corrupt_newest_checkpoint_falls_back_to_the_previous_one_and_says_so() {
        let root = tempfile::tempdir().unwrap();
        let dir = run_with_steps(root.path(), 3);
        truncate(&dir.file_for_step(3));
        let choice = choose_resume_checkpoint(&dir, None).unwrap();
        assert_eq!(choice.checkpoint.meta.state.step, 2);
        assert_eq!(choice.skipped.len(), 1);
        assert_eq!(choice.skipped[0].path, dir.file_for_step(3));
        let reason = &choice.skipped[0].reason;
        assert!(
            reason.starts_with("is not a valid safetensors file"),
            "the reason, without the path again: {reason}"
        );

        // Named explicitly, the corrupt file is refused, not replaced.
        let error = choose_resume_checkpoint(&dir, Some(&dir.file_for_step(3))).unwrap_err();
        assert!(
            matches!(error, ResumeError::Named(_)) && error.to_string().contains("step_00000003"),
            "{error}"
        );
    }

    #[test]
    fn a_latest_pointer_to_a_missing_file_falls_back_and_is_reported() {
        let root = tempfile::tempdir().unwrap();
        let dir = run_with_steps(root.path(), 2);
        std::fs::remove_file(dir.file_for_step(2)).unwrap();
        let choice = choose_resume_checkpoint(&dir, None).unwrap();
        assert_eq!(choice.checkpoint.meta.state.step, 1);
        assert_eq!(choice.skipped.len(), 1);
        assert!(
            choice.skipped[0].reason.contains("does not exist"),
            "{:?}",
            choice.skipped
        );
    }

    #[test]
    fn the_latest_pointer_wins_over_a_higher_step_and_nothing_valid_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        let dir = run_with_steps(root.path(), 3);
        // A run resumed from step 2 points `latest` there; step 3 is from an abandoned branch.
        dir.set_latest(&dir.file_for_step(2)).unwrap();
        let choice = choose_resume_checkpoint(&dir, None).unwrap();
        assert_eq!(choice.checkpoint.meta.state.step, 2);
        assert!(choice.skipped.is_empty());

        for step in 1..=3 {
            truncate(&dir.file_for_step(step));
        }
        let error = choose_resume_checkpoint(&dir, None).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(&error, ResumeError::NoneVerifies { skipped, .. } if skipped.len() == 3),
            "{message}"
        );
        assert!(message.contains("step_00000001"), "{message}");

        let empty = CheckpointDir::new(root.path().join("nothing"));
        let error = choose_resume_checkpoint(&empty, None).unwrap_err();
        assert!(matches!(error, ResumeError::NoneSaved { .. }), "{error}");
    }
}

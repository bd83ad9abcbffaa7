//! What a command-line checkpoint argument names, resolved to one file. Every command that
//! takes a checkpoint (`eval`, `predict`, `eval-sam2`, `predict-sam2`, `train --init-from`,
//! `train-sam2 --encoder`, …) accepts the same forms:
//!
//! * a file: itself (a segburn checkpoint, or official weights where the command takes them);
//! * a run's `latest` or `best` pointer (`<run>/checkpoints/latest`): the checkpoint it names;
//! * a run directory, or its `checkpoints/` folder: the run's newest checkpoint, as
//!   [`CheckpointDir::latest`] picks it.

use std::path::{Path, PathBuf};

use super::run_files::{CheckpointDir, BEST, CHECKPOINTS_FOLDER, LATEST};

/// Pointer files are one short line; anything longer named `latest`/`best` is a checkpoint.
const MAX_POINTER_BYTES: u64 = 4096;

const FORMS: &str = "give a checkpoint file, a run directory, its checkpoints/ folder, or the \
                     run's checkpoints/latest or checkpoints/best";

/// Why a checkpoint argument names no checkpoint. Each message names the path.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{} does not exist{hint}", path.display())]
    Missing { path: PathBuf, hint: &'static str },
    #[error(
        "{} is a folder but neither a run directory (no {CHECKPOINTS_FOLDER}/ folder in it) nor \
         a checkpoints folder (no step_*.safetensors in it); {FORMS}",
        path.display()
    )]
    NotARunDirectory { path: PathBuf },
    #[error(
        "no checkpoint in {}: the run has not saved one yet (checkpoints are written every \
         train.checkpoint_every_steps and at the end of training)",
        dir.display()
    )]
    NoCheckpoint { dir: PathBuf },
    #[error("cannot read the pointer file {}: {error}", path.display())]
    Pointer {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("the pointer file {} is empty; {FORMS}", path.display())]
    EmptyPointer { path: PathBuf },
    #[error(
        "the pointer file {} names {}, which does not exist (deleted by hand?); give another \
         checkpoint of the run (e.g. the run directory: its newest checkpoint)",
        pointer.display(),
        target.display()
    )]
    DanglingPointer { pointer: PathBuf, target: PathBuf },
}

/// The checkpoint file `path` names (see the module documentation for the forms).
pub fn resolve_checkpoint(path: &Path) -> Result<PathBuf, ResolveError> {
    if path.is_dir() {
        return newest_in(path);
    }
    if !path.exists() {
        return Err(ResolveError::Missing {
            path: path.to_path_buf(),
            hint: missing_hint(path),
        });
    }
    if is_pointer(path) {
        return follow_pointer(path);
    }
    Ok(path.to_path_buf())
}

/// The newest checkpoint of a run directory or of its `checkpoints/` folder.
fn newest_in(dir: &Path) -> Result<PathBuf, ResolveError> {
    let nested = CheckpointDir::of_run(dir);
    let folder = if nested.path().is_dir() {
        nested
    } else {
        let folder = CheckpointDir::new(dir);
        let looks_like_checkpoints = !folder.list().is_empty()
            || folder.path().join(LATEST).is_file()
            || folder.path().file_name() == Some(CHECKPOINTS_FOLDER.as_ref());
        if !looks_like_checkpoints {
            return Err(ResolveError::NotARunDirectory {
                path: dir.to_path_buf(),
            });
        }
        folder
    };
    folder.latest().ok_or_else(|| ResolveError::NoCheckpoint {
        dir: folder.path().to_path_buf(),
    })
}

fn is_pointer(path: &Path) -> bool {
    let named = matches!(
        path.file_name().and_then(|n| n.to_str()),
        Some(LATEST | BEST)
    );
    named && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= MAX_POINTER_BYTES)
}

fn follow_pointer(pointer: &Path) -> Result<PathBuf, ResolveError> {
    let text = std::fs::read_to_string(pointer).map_err(|error| ResolveError::Pointer {
        path: pointer.to_path_buf(),
        error,
    })?;
    let name = text.trim();
    if name.is_empty() {
        return Err(ResolveError::EmptyPointer {
            path: pointer.to_path_buf(),
        });
    }
    let target = pointer.parent().unwrap_or(Path::new(".")).join(name);
    if !target.is_file() {
        return Err(ResolveError::DanglingPointer {
            pointer: pointer.to_path_buf(),
            target,
        });
    }
    Ok(target)
}

/// What a user most likely meant by a path that is not there.
fn missing_hint(path: &Path) -> &'static str {
    match path.file_name().and_then(|n| n.to_str()) {
        Some(BEST) if path.parent().is_some_and(Path::is_dir) => {
            " (a run marks its best checkpoint at a validation that improves the mIoU; this run \
             has not yet: give checkpoints/latest or the run directory)"
        }
        Some(LATEST) if path.parent().is_some_and(Path::is_dir) => {
            " (the run has not saved a checkpoint yet)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run directory (name with spaces and non-ASCII) with checkpoints of steps 2 and 4,
    /// `latest` at 4 and `best` at 2.
    fn run_with_checkpoints() -> (tempfile::TempDir, PathBuf, CheckpointDir) {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("run été 数据");
        let dir = CheckpointDir::of_run(&run);
        std::fs::create_dir_all(dir.path()).unwrap();
        for step in [2, 4] {
            std::fs::write(dir.file_for_step(step), b"weights").unwrap();
        }
        dir.set_latest(&dir.file_for_step(4)).unwrap();
        dir.set_best(&dir.file_for_step(2)).unwrap();
        (root, run, dir)
    }

    #[test]
    fn every_form_names_the_same_run_checkpoints() {
        let (_root, run, dir) = run_with_checkpoints();
        let newest = dir.file_for_step(4);
        assert_eq!(resolve_checkpoint(&run).unwrap(), newest);
        assert_eq!(resolve_checkpoint(dir.path()).unwrap(), newest);
        assert_eq!(
            resolve_checkpoint(&dir.path().join(LATEST)).unwrap(),
            newest
        );
        assert_eq!(
            resolve_checkpoint(&dir.path().join(BEST)).unwrap(),
            dir.file_for_step(2)
        );
        assert_eq!(resolve_checkpoint(&newest).unwrap(), newest);
        // A checkpoints folder without a `latest` pointer: the highest step.
        std::fs::remove_file(dir.path().join(LATEST)).unwrap();
        assert_eq!(resolve_checkpoint(&run).unwrap(), newest);
    }

    #[test]
    fn a_large_file_named_best_is_a_checkpoint_not_a_pointer() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join(BEST);
        std::fs::write(&file, vec![0u8; MAX_POINTER_BYTES as usize + 1]).unwrap();
        assert_eq!(resolve_checkpoint(&file).unwrap(), file);
    }

    #[test]
    fn each_wrong_form_is_named() {
        let (root, run, dir) = run_with_checkpoints();
        let message = |path: &Path| resolve_checkpoint(path).unwrap_err().to_string();

        let missing = root.path().join("nowhere é.safetensors");
        let text = message(&missing);
        assert!(text.contains("nowhere é.safetensors") && text.contains("does not exist"));

        let unrelated = root.path().join("photos");
        std::fs::create_dir_all(&unrelated).unwrap();
        let text = message(&unrelated);
        assert!(
            text.contains("photos") && text.contains("neither a run directory"),
            "{text}"
        );

        let empty_run = root.path().join("empty run");
        std::fs::create_dir_all(empty_run.join(CHECKPOINTS_FOLDER)).unwrap();
        let text = message(&empty_run);
        assert!(
            text.contains("no checkpoint in") && text.contains("empty run"),
            "{text}"
        );

        std::fs::remove_file(dir.file_for_step(2)).unwrap();
        let text = message(&dir.path().join(BEST));
        assert!(
            text.contains("step_00000002.safetensors") && text.contains("does not exist"),
            "{text}"
        );

        std::fs::write(dir.path().join(LATEST), "\n").unwrap();
        let text = message(&dir.path().join(LATEST));
        assert!(
            text.contains("is empty") && text.contains("run été"),
            "{text}"
        );

        std::fs::remove_file(dir.path().join(BEST)).unwrap();
        let text = message(&dir.path().join(BEST));
        assert!(text.contains("has not yet"), "{text}");
        // The run directory still resolves: `latest` is empty, the newest step is on disk.
        assert_eq!(resolve_checkpoint(&run).unwrap(), dir.file_for_step(4));
    }
}

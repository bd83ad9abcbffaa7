//! What a failed save says: the stage that failed and why, the space a checkpoint needs, and
//! what is left to resume from.

use std::path::{Path, PathBuf};

/// What a failed save leaves to resume from.
#[derive(Debug, Clone, PartialEq)]
pub enum PreviousCheckpoint {
    /// Not known here (a save outside a run's checkpoint directory).
    Unknown,
    /// The run's newest earlier checkpoint, still on disk.
    Intact(PathBuf),
    /// The run had no earlier checkpoint.
    NoneSaved,
    /// The checkpoint directory itself is gone (deleted, or its disk unmounted).
    DirectoryGone(PathBuf),
}

pub(crate) fn save_failure_message(
    path: &Path,
    stage: &str,
    error: &std::io::Error,
    needed_bytes: u64,
    previous: &PreviousCheckpoint,
) -> String {
    use std::io::ErrorKind;
    let cause = match error.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => " (the disk is full)",
        ErrorKind::ReadOnlyFilesystem => " (the file system is read-only)",
        ErrorKind::PermissionDenied => " (no permission to write there)",
        ErrorKind::NotFound => " (the directory is gone: deleted or unmounted while training?)",
        _ => "",
    };
    let after = match previous {
        PreviousCheckpoint::Unknown => String::new(),
        PreviousCheckpoint::Intact(p) => format!(
            " The previous checkpoint, {}, is intact: fix the problem, then continue with --resume.",
            p.display()
        ),
        PreviousCheckpoint::NoneSaved => {
            " The run has no earlier checkpoint; its progress is lost.".to_string()
        }
        PreviousCheckpoint::DirectoryGone(dir) => format!(
            " The checkpoint directory {} no longer exists, and any earlier checkpoint with it.",
            dir.display()
        ),
    };
    let space = match needed_bytes {
        0 => String::new(),
        n => format!(
            " A checkpoint needs {:.1} MB ({n} bytes) of free space there.",
            n as f64 / 1e6
        ),
    };
    format!(
        "cannot save the checkpoint {}: {stage} failed: {error}{cause}. The unfinished file was \
         removed.{space}{after}",
        path.display(),
    )
}

//! Long and non-ASCII paths under the checkpoint folder: create a folder, write a file, read
//! it back, delete everything. Windows without long-path support stops at 260 characters
//! (MAX_PATH); some tools mangle non-ASCII names. Both break checkpoint saving late in a run.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Check, Section, Status};

/// Windows' classic MAX_PATH.
pub const MAX_PATH: usize = 260;

/// One path round trip.
#[derive(Debug, Clone, Serialize)]
pub struct PathProbe {
    /// "long path" or "non-ASCII path".
    pub kind: &'static str,
    /// Characters in the deepest file path used.
    pub path_chars: usize,
    /// `Err` names the step that failed and the OS error.
    pub outcome: Result<(), String>,
}

/// A scratch folder under `base` that no one else uses.
fn scratch(base: &Path) -> PathBuf {
    base.join(format!(".segburn-doctor-paths-{}", std::process::id()))
}

/// Create `dir`, write `name` with a known content, read it back, then remove `top`.
fn round_trip(top: &Path, dir: &Path, name: &str) -> (usize, Result<(), String>) {
    let file = dir.join(name);
    let chars = file.to_string_lossy().chars().count();
    let content = "checkpoint données 数据 ✓".as_bytes();
    let result = (|| {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create the folder: {e}"))?;
        fs::write(&file, content).map_err(|e| format!("cannot write a file: {e}"))?;
        let back = fs::read(&file).map_err(|e| format!("cannot read the file back: {e}"))?;
        if back != content {
            return Err("the file read back differs from what was written".to_string());
        }
        let listed = fs::read_dir(dir)
            .map_err(|e| format!("cannot list the folder: {e}"))?
            .filter_map(Result::ok)
            .any(|entry| entry.file_name().to_string_lossy() == name);
        if !listed {
            return Err("the file name is not listed as written (name mangled?)".to_string());
        }
        Ok(())
    })();
    let cleanup =
        fs::remove_dir_all(top).map_err(|e| format!("cannot delete the test folder: {e}"));
    (chars, result.and(cleanup))
}

/// A folder path under `base` whose file path is longer than [`MAX_PATH`].
pub fn probe_long_path(base: &Path) -> PathProbe {
    let top = scratch(base);
    let mut dir = top.clone();
    let segment = "long-folder-name-for-the-max-path-check-0123456789";
    while dir.to_string_lossy().chars().count() <= MAX_PATH + 10 {
        dir.push(segment);
    }
    let (path_chars, outcome) = round_trip(&top, &dir, "checkpoint_000100.safetensors");
    PathProbe {
        kind: "long path",
        path_chars,
        outcome,
    }
}

/// Accented, CJK and apostrophe names under `base`.
pub fn probe_non_ascii_path(base: &Path) -> PathProbe {
    let top = scratch(base);
    let dir = top.join("données d'essai").join("数据");
    let (path_chars, outcome) = round_trip(&top, &dir, "modèle_最佳.safetensors");
    PathProbe {
        kind: "non-ASCII path",
        path_chars,
        outcome,
    }
}

/// The report lines for probes under `base` (the checkpoint folder or the parent it will be
/// created in). A failure is a warning, unless the run folder itself is such a path.
pub fn checks(base: &Path, run_dir: &Path) -> Vec<Check> {
    let run_dir_text = run_dir.to_string_lossy();
    let run_dir_is_long = run_dir_text.chars().count() + 40 > MAX_PATH;
    let run_dir_is_non_ascii = !run_dir_text.is_ascii();
    [(probe_long_path(base), run_dir_is_long), (probe_non_ascii_path(base), run_dir_is_non_ascii)]
        .into_iter()
        .map(|(probe, needed)| {
            let name = format!("checkpoint folder: {}", probe.kind);
            match probe.outcome {
                Ok(()) => Check::new(
                    Section::Storage,
                    name,
                    Status::Ok,
                    format!("create, write, read back, delete at {} characters", probe.path_chars),
                ),
                Err(e) => {
                    let status = if needed { Status::Fail } else { Status::Warn };
                    let hint = if probe.kind == "long path" {
                        "on Windows enable long paths (LongPathsEnabled = 1 under HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem) or use a shorter train.run_dir"
                    } else {
                        "use an ASCII-only train.run_dir, or check the file system / locale settings"
                    };
                    Check::new(Section::Storage, name, status, format!("failed at {} characters: {e}", probe.path_chars)).hint(hint)
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_probes_pass_inside_a_non_ascii_folder_and_clean_up() {
        let temp = tempfile::tempdir().unwrap();
        let base = temp.path().join("données d'essai").join("数据");
        fs::create_dir_all(&base).unwrap();
        let long = probe_long_path(&base);
        assert_eq!(long.outcome, Ok(()));
        assert!(long.path_chars > MAX_PATH);
        let non_ascii = probe_non_ascii_path(&base);
        assert_eq!(non_ascii.outcome, Ok(()));
        assert_eq!(
            fs::read_dir(&base).unwrap().count(),
            0,
            "nothing is left behind"
        );
    }

    #[test]
    fn a_missing_base_is_reported_not_panicked() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("a-file");
        fs::write(&file, b"x").unwrap();
        let probe = probe_non_ascii_path(&file);
        assert!(probe
            .outcome
            .unwrap_err()
            .contains("cannot create the folder"));
    }
}

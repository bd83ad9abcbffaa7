//! The checkpoint and dataset folders: do they exist, can segburn write there, and how long
//! does saving a checkpoint-sized file take (write + fsync, as the checkpoint writer does).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::{Check, Section, Status};

/// A PIDNet-S checkpoint with optimizer state is ~60 MB, PIDNet-S weights alone ~30 MB.
pub const PROBE_FILE_BYTES: usize = 30 * 1000 * 1000;

/// Above this, saving is slow enough to stall training: typically an antivirus scanning every
/// file written to the folder, or a network / synced folder.
pub const SLOW_SAVE_SECONDS: f64 = 2.0;

/// The state of one folder.
#[derive(Debug, Clone, Serialize)]
pub struct FolderCheck {
    pub path: PathBuf,
    pub exists: bool,
    /// The folder (or, when it does not exist yet, its nearest existing parent, where it
    /// would be created) accepts a new file.
    pub writable: Result<(), String>,
    /// That nearest existing parent, when the folder itself is missing.
    pub create_in: Option<PathBuf>,
}

/// How long writing and fsyncing the probe file took.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SaveTiming {
    pub bytes: usize,
    pub write_seconds: f64,
    pub fsync_seconds: f64,
}

impl SaveTiming {
    pub fn total_seconds(&self) -> f64 {
        self.write_seconds + self.fsync_seconds
    }

    pub fn megabytes_per_second(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.total_seconds().max(1e-9)
    }

    pub fn is_slow(&self) -> bool {
        self.total_seconds() > SLOW_SAVE_SECONDS
    }
}

/// A file name no one else uses.
fn probe_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(".segburn-doctor-{}-{nanos}.tmp", std::process::id())
}

/// Creates and deletes a small file in `dir`.
pub fn try_write(dir: &Path) -> Result<(), String> {
    let path = dir.join(probe_name());
    let result = fs::write(&path, b"segburn doctor").map_err(|e| e.to_string());
    let _ = fs::remove_file(&path);
    result
}

/// Checks `path` without creating it.
pub fn check_folder(path: &Path) -> FolderCheck {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if path.is_dir() {
        return FolderCheck {
            writable: try_write(&path),
            exists: true,
            create_in: None,
            path,
        };
    }
    let parent = path
        .ancestors()
        .skip(1)
        .find(|p| p.is_dir())
        .map(Path::to_path_buf);
    let writable = match (&parent, path.exists()) {
        (_, true) => Err("it exists but is not a folder".to_string()),
        (Some(parent), false) => try_write(parent),
        (None, false) => Err("no parent folder exists".to_string()),
    };
    FolderCheck {
        path,
        exists: false,
        writable,
        create_in: parent,
    }
}

/// Writes `bytes` bytes to a new file in `dir`, fsyncs it, deletes it.
pub fn time_save(dir: &Path, bytes: usize) -> io::Result<SaveTiming> {
    let path = dir.join(probe_name());
    let data = vec![0x5Au8; bytes];
    let result = (|| {
        let started = Instant::now();
        let mut file = File::create(&path)?;
        file.write_all(&data)?;
        file.flush()?;
        let written = Instant::now();
        file.sync_all()?;
        Ok(SaveTiming {
            bytes,
            write_seconds: (written - started).as_secs_f64(),
            fsync_seconds: written.elapsed().as_secs_f64(),
        })
    })();
    let _ = fs::remove_file(&path);
    result
}

/// The report lines: the checkpoint folder (needed: writable), the dataset folder (needed
/// when an experiment names it) and the save timing.
pub fn checks(checkpoint_dir: &Path, dataset_dir: &Path, from_experiment: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    let checkpoint = check_folder(checkpoint_dir);
    let shown = checkpoint.path.display().to_string();
    checks.push(match (&checkpoint.writable, checkpoint.exists) {
        (Ok(()), true) => Check::new(Section::Storage, "checkpoint folder", Status::Ok, format!("{shown}: exists, writable")),
        (Ok(()), false) => Check::new(
            Section::Storage,
            "checkpoint folder",
            Status::Ok,
            format!("{shown}: will be created (its parent is writable)"),
        ),
        (Err(e), _) => Check::new(Section::Storage, "checkpoint folder", Status::Fail, format!("{shown}: not writable: {e}"))
            .hint("checkpoints cannot be saved there: fix the permissions, or pick another folder with --set train.run_dir=PATH"),
    });
    let dataset = check_folder(dataset_dir);
    let shown = dataset.path.display().to_string();
    checks.push(if dataset.exists {
        Check::new(
            Section::Storage,
            "dataset folder",
            Status::Ok,
            format!("{shown}: exists"),
        )
    } else {
        let status = if from_experiment {
            Status::Fail
        } else {
            Status::Warn
        };
        Check::new(
            Section::Storage,
            "dataset folder",
            status,
            format!("{shown}: not found"),
        )
        .hint("see datasets/README.md for the layouts; the bundled sample is datasets/sample")
    });
    let target = if checkpoint.exists {
        Some(checkpoint.path.clone())
    } else {
        checkpoint.create_in.clone()
    };
    if let (Some(dir), Ok(())) = (target, &checkpoint.writable) {
        checks.push(match time_save(&dir, PROBE_FILE_BYTES) {
            Ok(timing) => {
                let detail = format!(
                    "{:.0} MB written in {:.2} s + fsync {:.2} s ({:.0} MB/s) in {}",
                    timing.bytes as f64 / 1e6,
                    timing.write_seconds,
                    timing.fsync_seconds,
                    timing.megabytes_per_second(),
                    dir.display()
                );
                if timing.is_slow() {
                    Check::new(Section::Storage, "checkpoint save speed", Status::Warn, detail).hint(
                        "slow saves usually mean an antivirus scans every file written there (exclude the folder), \
                         or a network / cloud-synced folder: put train.run_dir on a local disk",
                    )
                } else {
                    Check::new(Section::Storage, "checkpoint save speed", Status::Ok, detail)
                }
            }
            Err(e) => Check::new(Section::Storage, "checkpoint save speed", Status::Fail, format!("writing a test file failed: {e}"))
                .hint("is the disk full? checkpoints need about 60 MB each for PIDNet-S"),
        });
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_missing_and_blocked_folders() {
        let dir = tempfile::tempdir().unwrap();
        let check = check_folder(dir.path());
        assert!(check.exists && check.writable.is_ok());

        let missing = check_folder(&dir.path().join("runs/a"));
        assert!(!missing.exists);
        assert!(missing.writable.is_ok());
        assert_eq!(missing.create_in.as_deref(), Some(dir.path()));

        let file = dir.path().join("plain-file");
        fs::write(&file, b"x").unwrap();
        assert!(check_folder(&file).writable.is_err());
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "probe files are removed"
        );
    }

    #[test]
    fn report_lines_for_a_fresh_run_folder() {
        let dir = tempfile::tempdir().unwrap();
        let lines = checks(
            &dir.path().join("runs/new"),
            &dir.path().join("no-data"),
            true,
        );
        assert_eq!(lines[0].status, Status::Ok);
        assert!(lines[0].detail.contains("will be created"));
        assert_eq!(
            lines[1].status,
            Status::Fail,
            "an experiment's dataset must exist"
        );
        assert_eq!(lines[2].name, "checkpoint save speed");
        assert!(
            !dir.path().join("runs").exists(),
            "the doctor creates nothing"
        );
    }

    #[test]
    fn a_save_is_timed_and_cleaned_up() {
        let dir = tempfile::tempdir().unwrap();
        let timing = time_save(dir.path(), 1 << 20).unwrap();
        assert_eq!(timing.bytes, 1 << 20);
        assert!(timing.total_seconds() > 0.0 && timing.megabytes_per_second() > 0.0);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(time_save(&dir.path().join("missing"), 10).is_err());
    }
}

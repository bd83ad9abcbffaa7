//! The checkpoint files of one run: `step_00000042.safetensors`, the `latest` and `best`
//! pointers (small text files naming a checkpoint, replaced atomically), and rotation.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use segburn_models::tensor_file::NamedTensors;

use super::file::{
    save_checkpoint_in, sync_dir, write_durably, CheckpointError, CheckpointMeta, CreateDir,
    FORMAT_VERSION,
};
use super::save_failure::PreviousCheckpoint;
use super::train_state::TrainState;

/// A checkpoint [`CheckpointDir::save_step`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedCheckpoint {
    pub path: PathBuf,
    pub bytes: u64,
    pub seconds: f64,
}

/// How many checkpoints to keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retention {
    /// The newest `keep_last` step checkpoints are kept (at least 1: the newest is never
    /// deleted).
    pub keep_last: usize,
    /// Also keep the checkpoint with the best validation mIoU.
    pub keep_best: bool,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            keep_last: 2,
            keep_best: true,
        }
    }
}

/// The `checkpoints/` directory of a run.
#[derive(Debug, Clone)]
pub struct CheckpointDir {
    dir: PathBuf,
}

/// The folder of a run directory that holds its checkpoints.
pub const CHECKPOINTS_FOLDER: &str = "checkpoints";

/// The pointer files of a run's checkpoints folder.
pub(crate) const LATEST: &str = "latest";
pub(crate) const BEST: &str = "best";

impl CheckpointDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The checkpoints folder of the run directory `run_dir`.
    pub fn of_run(run_dir: &Path) -> Self {
        Self::new(run_dir.join(CHECKPOINTS_FOLDER))
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The file a checkpoint of `step` is written to.
    pub fn file_for_step(&self, step: u64) -> PathBuf {
        self.dir.join(format!("step_{step:08}.safetensors"))
    }

    fn step_of(path: &Path) -> Option<u64> {
        let name = path.file_name()?.to_str()?;
        name.strip_prefix("step_")?
            .strip_suffix(".safetensors")?
            .parse()
            .ok()
    }

    /// Step checkpoints present on disk, oldest first.
    pub fn list(&self) -> Vec<(u64, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut found: Vec<(u64, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter_map(|p| Self::step_of(&p).map(|s| (s, p)))
            .collect();
        found.sort();
        found
    }

    fn write_pointer(&self, name: &str, target: &Path) -> Result<(), CheckpointError> {
        let file_name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let pointer = self.dir.join(name);
        let temporary = self.dir.join(format!(".{name}.partial"));
        let failed = |stage: String, error| CheckpointError::Save {
            path: target.to_path_buf(),
            stage,
            error,
            needed_bytes: 0,
            previous: self.previous_checkpoint(target),
        };
        let written = write_durably(&temporary, format!("{file_name}\n").as_bytes())
            .map_err(|e| failed(format!("writing the `{name}` pointer"), e))
            .and_then(|()| {
                std::fs::rename(&temporary, &pointer)
                    .map_err(|e| failed(format!("replacing the `{name}` pointer"), e))
            });
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written?;
        sync_dir(&self.dir);
        Ok(())
    }

    /// The file a pointer names, whether or not it exists.
    pub(crate) fn pointer_target(&self, name: &str) -> Option<PathBuf> {
        let text = std::fs::read_to_string(self.dir.join(name)).ok()?;
        let name = text.trim();
        // An empty pointer would name the folder itself.
        (!name.is_empty()).then(|| self.dir.join(name))
    }

    fn read_pointer(&self, name: &str) -> Option<PathBuf> {
        self.pointer_target(name).filter(|path| path.is_file())
    }

    /// What a failed save of `saving` leaves to resume from.
    fn previous_checkpoint(&self, saving: &Path) -> PreviousCheckpoint {
        if !self.dir.is_dir() {
            return PreviousCheckpoint::DirectoryGone(self.dir.clone());
        }
        let newest_other = || {
            self.list()
                .into_iter()
                .rev()
                .map(|(_, path)| path)
                .find(|path| path != saving)
        };
        match self.read_pointer(LATEST).filter(|p| p != saving) {
            Some(path) => PreviousCheckpoint::Intact(path),
            None => {
                newest_other().map_or(PreviousCheckpoint::NoneSaved, PreviousCheckpoint::Intact)
            }
        }
    }

    /// Marks `path` as the newest checkpoint.
    pub fn set_latest(&self, path: &Path) -> Result<(), CheckpointError> {
        self.write_pointer(LATEST, path)
    }

    /// Marks `path` as the best checkpoint.
    pub fn set_best(&self, path: &Path) -> Result<(), CheckpointError> {
        self.write_pointer(BEST, path)
    }

    /// The newest checkpoint: the `latest` pointer, or the highest step on disk.
    pub fn latest(&self) -> Option<PathBuf> {
        self.read_pointer(LATEST)
            .or_else(|| self.list().pop().map(|(_, p)| p))
    }

    /// The best checkpoint, if one was marked.
    pub fn best(&self) -> Option<PathBuf> {
        self.read_pointer(BEST)
    }

    /// Saves the checkpoint of `state.step` (model, optimizer state, the position and the
    /// resolved experiment `config`), points `latest` at it (and `best` when this step holds
    /// the best metric), then rotates old files.
    pub fn save_step(
        &self,
        state: &TrainState,
        config: &str,
        model: &NamedTensors,
        optimizer: &NamedTensors,
        retention: &Retention,
    ) -> Result<SavedCheckpoint, CheckpointError> {
        let started = std::time::Instant::now();
        let step = state.step;
        let path = self.file_for_step(step);
        let meta = CheckpointMeta {
            format_version: FORMAT_VERSION,
            state: state.clone(),
            config: config.to_string(),
            segburn_version: env!("CARGO_PKG_VERSION").to_string(),
            burn_version: "0.21.0".to_string(),
        };
        // Only the last directory level is created: a run directory that vanished (deleted, or
        // its disk unmounted) is an error to report, not a tree to rebuild elsewhere.
        let bytes = save_checkpoint_in(&path, model, optimizer, &meta, CreateDir::LastLevel)
            .map_err(|error| match error {
                CheckpointError::Save {
                    path,
                    stage,
                    error,
                    needed_bytes,
                    ..
                } => CheckpointError::Save {
                    previous: self.previous_checkpoint(&path),
                    path,
                    stage,
                    error,
                    needed_bytes,
                },
                other => other,
            })?;
        self.set_latest(&path)?;
        if state.best_metric.is_some_and(|(_, best)| best == step) {
            self.set_best(&path)?;
        }
        self.rotate(retention);
        Ok(SavedCheckpoint {
            path,
            bytes,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Deletes step checkpoints beyond the retention policy. The newest checkpoint and the one
    /// `latest` points to are never deleted; leftover `.partial` files of an interrupted save
    /// are removed.
    pub fn rotate(&self, retention: &Retention) -> Vec<PathBuf> {
        let all = self.list();
        let keep_last = retention.keep_last.max(1);
        let latest = self.read_pointer(LATEST);
        let best = retention.keep_best.then(|| self.best()).flatten();
        let mut deleted = Vec::new();
        let cutoff = all.len().saturating_sub(keep_last);
        for (_, path) in &all[..cutoff] {
            if Some(path) == latest.as_ref() || Some(path) == best.as_ref() {
                continue;
            }
            if std::fs::remove_file(path).is_ok() {
                deleted.push(path.clone());
            }
        }
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.filter_map(|e| e.ok()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(".step_") && name.ends_with(".partial") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        deleted
    }
}

#[cfg(test)]
#[path = "run_files_tests.rs"]
mod tests;

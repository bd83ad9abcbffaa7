//! One training run per run directory: an exclusive OS lock on `<run dir>/train.lock`, held
//! for the trainer's lifetime. The operating system drops the lock when its process ends, even
//! by `kill -9` or a power cut, so a lock is never stale; the file itself stays and names the
//! last holder (process id and start time), which a refused second run quotes.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The lock file's name inside the run directory.
pub const LOCK_FILE: &str = "train.lock";

#[derive(Debug, thiserror::Error)]
pub enum RunLockError {
    #[error(
        "{run_dir} is in use by another training run ({holder}); two runs in one directory \
         would overwrite each other's checkpoints. Wait for it to finish or stop it, or give \
         this run another train.run_dir"
    )]
    Held { run_dir: PathBuf, holder: String },
    #[error("cannot lock the run directory through {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// The held lock of a run directory; dropping it releases the directory.
#[derive(Debug)]
pub struct RunDirLock {
    file: File,
    path: PathBuf,
}

impl RunDirLock {
    /// Creates `run_dir` if needed and locks it, or says who holds it.
    pub fn acquire(run_dir: &Path) -> Result<Self, RunLockError> {
        let path = run_dir.join(LOCK_FILE);
        let io = |error| RunLockError::Io {
            path: path.clone(),
            error,
        };
        std::fs::create_dir_all(run_dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(RunLockError::Held {
                    run_dir: run_dir.to_path_buf(),
                    holder: holder_description(&mut file),
                })
            }
            Err(TryLockError::Error(error)) => return Err(io(error)),
        }
        let holder = format!(
            "pid {}\nstarted {}\n",
            std::process::id(),
            utc_timestamp(SystemTime::now())
        );
        file.set_len(0).map_err(io)?;
        file.write_all(holder.as_bytes()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Self { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDirLock {
    fn drop(&mut self) {
        // The holder is gone; the file stays (deleting it would race a new holder).
        let _ = self.file.set_len(0);
    }
}

/// "process 1234, started 2026-12-01 05:41:55 UTC", from the holder's lock file.
fn holder_description(file: &mut File) -> String {
    let mut text = String::new();
    // Windows locks the bytes too: the holder's details are then unreadable.
    if file.read_to_string(&mut text).is_err() {
        return "its process id is unreadable while it holds the lock".to_string();
    }
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .map(str::to_string)
    };
    match (field("pid "), field("started ")) {
        (Some(pid), Some(started)) => format!("process {pid}, started {started}"),
        _ => "a process that is just starting".to_string(),
    }
}

/// `2026-12-01 05:41:55 UTC`, without a date library (days to civil date: Howard Hinnant's
/// algorithm for the proleptic Gregorian calendar).
fn utc_timestamp(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_and_released_on_drop() {
        let root = tempfile::tempdir().unwrap();
        let run_dir = root.path().join("run été").join("数据");
        let held = RunDirLock::acquire(&run_dir).unwrap();
        let error = RunDirLock::acquire(&run_dir).unwrap_err().to_string();
        let pid = format!("process {}, started ", std::process::id());
        assert!(
            error.contains(&pid) && error.contains("run été") && error.contains("run_dir"),
            "{error}"
        );
        drop(held);
        let again = RunDirLock::acquire(&run_dir).expect("free after the holder dropped it");
        assert!(again.path().ends_with(LOCK_FILE));
    }

    #[test]
    fn a_lock_file_left_by_a_dead_process_is_not_a_lock() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join(LOCK_FILE),
            "pid 999999\nstarted 2020-01-01 00:00:00 UTC\n",
        )
        .unwrap();
        let lock = RunDirLock::acquire(root.path()).unwrap();
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert!(
            text.starts_with(&format!("pid {}\n", std::process::id())),
            "{text}"
        );
    }

    #[test]
    fn timestamps_are_civil_utc() {
        let at = |s| utc_timestamp(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(at(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(at(1_796_103_715), "2026-12-01 05:41:55 UTC");
    }
}

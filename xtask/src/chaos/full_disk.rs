//! The full-disk fault: a run on a tmpfs too small for its second checkpoint must fail cleanly.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::bail;

use super::checkpoints::final_checkpoint;
use super::task::Task;

/// A run on a tmpfs with room for about 1.5 checkpoints: the second save must fail with the
/// space it needs, no partial file, and a first checkpoint that verifies.
pub fn full_disk(task: &Task, scratch: &Path, checkpoint_bytes: u64) -> anyhow::Result<String> {
    let mount_point = scratch.join("small disk");
    std::fs::create_dir_all(&mount_point)?;
    let size = format!("size={}k", checkpoint_bytes * 3 / 2 / 1024);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
        .arg(&mount_point)
        .stderr(Stdio::null())
        .status();
    if !mounted.is_ok_and(|s| s.success()) {
        return Ok("skipped: cannot mount a small tmpfs here (needs root / CAP_SYS_ADMIN)".into());
    }
    let result = (|| -> anyhow::Result<String> {
        let run_dir = mount_point.join("run");
        let output = task.command(&run_dir, false).output()?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let checkpoints = run_dir.join("checkpoints");
        let partials: Vec<_> = std::fs::read_dir(&checkpoints)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".partial"))
            .collect();
        let expected = ["the disk is full", "is intact", "bytes) of free space"];
        if output.status.success() || !expected.iter().all(|e| stderr.contains(e)) {
            bail!("full disk: expected a failure saying {expected:?}, got: {stderr}");
        }
        if !partials.is_empty() {
            bail!("full disk: partial files left behind: {partials:?}");
        }
        let intact = final_checkpoint(&run_dir)?;
        Ok(format!(
            "failed cleanly at the save after step {} (no partial file; step {} verifies): {}",
            intact.meta.state.step,
            intact.meta.state.step,
            stderr.trim()
        ))
    })();
    let _ = Command::new("umount").arg(&mount_point).status();
    result
}

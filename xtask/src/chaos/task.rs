//! The two binaries chaos runs (`train`, `train-sam2`), built in release, with the `--set`
//! overrides that make a run take seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::bail;

use crate::workspace::workspace_root;

/// A binary and the settings that make its run tiny.
pub struct Task {
    pub name: &'static str,
    pub binary: PathBuf,
    pub config: &'static str,
    pub sets: Vec<String>,
    pub steps: u64,
}

impl Task {
    pub fn command(&self, run_dir: &Path, resume: bool) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .current_dir(workspace_root())
            .arg(self.config)
            .arg("--quiet")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let run_dir = format!("train.run_dir={:?}", run_dir.display().to_string());
        for set in self.sets.iter().chain([&run_dir]) {
            command.arg("--set").arg(set);
        }
        if resume {
            command.arg("--resume");
        }
        command
    }

    /// Runs to the end; the error names the task and shows what the binary printed.
    pub fn run_to_end(&self, run_dir: &Path, resume: bool) -> anyhow::Result<()> {
        let output = self.command(run_dir, resume).output()?;
        if !output.status.success() {
            bail!(
                "{} in {} failed ({}): {}",
                self.name,
                run_dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }
}

pub fn tasks(steps: u64) -> anyhow::Result<Vec<Task>> {
    let release = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("release");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "segburn", "--bin", "train"])
        .args(["--bin", "train-sam2"])
        .status()?;
    if !status.success() {
        bail!("building the binaries failed");
    }
    let max_steps = format!("train.max_steps={steps}");
    // A SAM2 step of this size is about 5× faster: more steps give the faults room to land.
    let sam2_steps = format!("train.max_steps={}", 5 * steps);
    let log_every_step = "train.log_every_steps=1".to_string();
    let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Ok(vec![
        Task {
            name: "train (PIDNet-S, 64 px crops, a checkpoint every step)",
            binary: release.join("train"),
            config: "configs/quickstart.ron",
            steps,
            sets: [
                strings(&[
                    "data.augment.base_size=128",
                    "data.augment.crop_height=64",
                    "data.augment.crop_width=64",
                    "loss.ohem.min_kept=1000",
                    "train.validate_at_end=false",
                    "train.checkpoint_every_steps=1",
                ]),
                vec![max_steps.clone(), log_every_step.clone()],
            ]
            .concat(),
        },
        Task {
            name: "train-sam2 (64 px, 5×K steps, a checkpoint every 2)",
            binary: release.join("train-sam2"),
            config: "configs/sam2_decoder.ron",
            steps: 5 * steps,
            sets: [
                strings(&[
                    "train.validate_at_end=false",
                    "train.checkpoint_every_steps=Some(2)",
                ]),
                vec![sam2_steps, log_every_step],
            ]
            .concat(),
        },
    ])
}

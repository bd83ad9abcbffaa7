//! Ctrl-C for `train` and `train-sam2`: the first SIGINT or SIGTERM (Ctrl-C, Ctrl-Break or a
//! closed console on Windows) lets the current optimizer step finish, saves a checkpoint and
//! exits with [`STOPPED_EXIT_CODE`]; a second one exits at once with [`ABORTED_EXIT_CODE`],
//! leaving the checkpoints as they were before the interrupted save.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;
use segburn_train::stop_signal::StopSignal;

/// Stopped on request after saving a checkpoint: continue with `--resume`. (75 is
/// `EX_TEMPFAIL` in sysexits.h, "try again later".)
pub const STOPPED_EXIT_CODE: i32 = 75;
/// Aborted by a second interrupt, without a final checkpoint (128 + SIGINT, as shells report
/// a process killed by Ctrl-C).
pub const ABORTED_EXIT_CODE: i32 = 130;

/// How a training command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done (or nothing to train: `--print-config`, `--check-data`, …).
    Finished,
    /// Stopped on request at a step boundary, with a checkpoint.
    Stopped,
}

impl Outcome {
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Finished => 0,
            Outcome::Stopped => STOPPED_EXIT_CODE,
        }
    }
}

/// Installs the process's interrupt handler (once per process) and returns the signal it
/// raises.
pub fn stop_on_interrupt() -> anyhow::Result<StopSignal> {
    let stop = StopSignal::new();
    let raised = stop.clone();
    let count = AtomicUsize::new(0);
    // ctrlc runs this on its own thread, not in signal context, so printing is safe.
    ctrlc::set_handler(move || {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            raised.request();
            eprintln!(
                "\ninterrupt: finishing the current step and saving a checkpoint (interrupt \
                 again to abort at once, losing the steps since the last checkpoint)"
            );
        } else {
            eprintln!("\ninterrupt: aborted; the last checkpoint written before is intact");
            std::process::exit(ABORTED_EXIT_CODE);
        }
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(stop)
}

/// The command that continues a stopped run: `train CONFIG --set … --resume`, quoted for a
/// POSIX shell where needed.
pub fn resume_command(binary: &str, config: &Path, overrides: &[String]) -> String {
    let mut words = vec![binary.to_string(), quote(&config.display().to_string())];
    for value in overrides {
        words.push("--set".to_string());
        words.push(quote(value));
    }
    words.push("--resume".to_string());
    words.join(" ")
}

fn quote(word: &str) -> String {
    let plain = |c: char| c.is_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The closing lines of a stopped run.
pub fn stopped_report(step: u64, checkpoint: Option<&Path>, resume: &str) -> String {
    match checkpoint {
        Some(path) => format!(
            "stopped on request after step {step}; checkpoint {}\ncontinue with: {resume}\n\
             (exit code {STOPPED_EXIT_CODE}: stopped with a checkpoint)",
            path.display()
        ),
        None => format!(
            "stopped on request before the first step; nothing was saved\n\
             (exit code {STOPPED_EXIT_CODE})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_command_quotes_what_a_shell_would_split() {
        let command = resume_command(
            "train",
            Path::new("configs/quickstart.ron"),
            &[
                "train.run_dir=\"runs/l'été 1\"".to_string(),
                "train.max_steps=6".to_string(),
            ],
        );
        assert_eq!(
            command,
            r#"train configs/quickstart.ron --set 'train.run_dir="runs/l'\''été 1"' --set train.max_steps=6 --resume"#
        );
    }
}

//! The console side of `--resume`: which checkpoint it continues from (skipping ones that do
//! not verify), and the experiment changes the engine found (`Engine::resume_differences`:
//! breaking ones refuse the resume, harmless ones are listed).

use std::path::Path;

use segburn_train::checkpoint::{
    choose_resume_checkpoint, list_skipped, resolve_checkpoint, Checkpoint, CheckpointDir,
};
use segburn_train::engine::ResumeDifferences;

/// The checkpoint `--resume [FILE]` continues from (see
/// [`choose_resume_checkpoint`]); prints the newer ones it skipped and why.
pub fn choose_checkpoint(dir: &CheckpointDir, named: Option<&Path>) -> anyhow::Result<Checkpoint> {
    // `--resume FILE` takes the same forms as every `--checkpoint` (a pointer, a run directory).
    let named = named.map(resolve_checkpoint).transpose()?;
    let choice = choose_resume_checkpoint(dir, named.as_deref())?;
    if !choice.skipped.is_empty() {
        println!(
            "--resume: skipped checkpoint(s) that do not verify, newest first:\n{}\nresuming from {}",
            list_skipped(&choice.skipped),
            choice.checkpoint.path.display()
        );
    }
    Ok(choice.checkpoint)
}

/// Refuses a resume whose experiment changed in breaking ways; prints the harmless changes.
pub fn accept_differences(
    checkpoint: &Path,
    differences: &ResumeDifferences,
) -> anyhow::Result<()> {
    let list = |d: &[segburn_train::engine::Difference]| {
        d.iter()
            .map(|(k, a, b)| format!("  {k}: {a} -> {b}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if !differences.breaking.is_empty() {
        anyhow::bail!(
            "cannot resume from {}: the experiment changed in ways the checkpoint cannot follow:\n{}\nstart a new run (another train.run_dir), or use --init-from to keep only the weights",
            checkpoint.display(),
            list(&differences.breaking)
        );
    }
    if !differences.harmless.is_empty() {
        println!(
            "resuming with these changes to the experiment:\n{}",
            list(&differences.harmless)
        );
    }
    Ok(())
}

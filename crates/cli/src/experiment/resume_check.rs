//! Which configuration changes a resume may carry: harmless ones (epochs, logging, paths) are
//! allowed and reported; ones that change what the checkpoint means (the model, the seed that
//! orders the data, the ignore index) are refused with the differences listed.

use std::path::Path;

use segburn_train::checkpoint::{
    choose_resume_checkpoint, list_skipped, resolve_checkpoint, Checkpoint, CheckpointDir,
};
use serde::Serialize;
use serde_json::Value;

use crate::experiment::Experiment;

/// Fields whose change makes a checkpoint meaningless for this experiment.
const BREAKING: &[&str] = &[
    "model.",
    "train.seed",
    "data.ignore_index",
    "loss.ignore_index",
];

/// One differing field: `(dotted path, checkpoint value, current value)`.
pub type Difference = (String, String, String);

fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&path, v, out);
            }
        }
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// The differences between two experiment roots (any serde struct), split into
/// `(breaking, harmless)`: a field is breaking when its dotted path equals or starts with one
/// of `breaking_prefixes` (`"model."`, `"train.seed"`).
pub fn split_differences<T: Serialize>(
    saved: &T,
    current: &T,
    breaking_prefixes: &[&str],
) -> (Vec<Difference>, Vec<Difference>) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    flatten(
        "",
        &serde_json::to_value(saved).unwrap_or(Value::Null),
        &mut a,
    );
    flatten(
        "",
        &serde_json::to_value(current).unwrap_or(Value::Null),
        &mut b,
    );
    let a: std::collections::BTreeMap<_, _> = a.into_iter().collect();
    let b: std::collections::BTreeMap<_, _> = b.into_iter().collect();
    let mut breaking = Vec::new();
    let mut harmless = Vec::new();
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let old = a.get(key).cloned().unwrap_or_else(|| "(absent)".into());
        let new = b.get(key).cloned().unwrap_or_else(|| "(absent)".into());
        if old == new {
            continue;
        }
        let difference = (key.clone(), old, new);
        let is_breaking = breaking_prefixes
            .iter()
            .any(|p| key == p.trim_end_matches('.') || key.starts_with(p));
        if is_breaking {
            breaking.push(difference);
        } else {
            harmless.push(difference);
        }
    }
    (breaking, harmless)
}

/// Splits the differences between the checkpoint's PIDNet experiment and the current one into
/// `(breaking, harmless)`.
pub fn compare(saved: &Experiment, current: &Experiment) -> (Vec<Difference>, Vec<Difference>) {
    let (mut breaking, harmless) = split_differences(saved, current, BREAKING);
    // The loader position counts micro-batches, so the number per step must stay the same; how
    // it splits into devices × grad_accum may change (a 4-GPU run resumes on 1 GPU with 4×).
    let per_step = |e: &Experiment| e.train.grad_accum * e.device.count();
    if per_step(saved) != per_step(current) {
        breaking.push((
            "micro-batches per step (train.grad_accum × devices)".to_string(),
            per_step(saved).to_string(),
            per_step(current).to_string(),
        ));
    }
    (breaking, harmless)
}

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

/// Refuses a resume whose experiment changed in `breaking` ways; prints the `harmless` changes.
pub fn accept_differences(
    checkpoint: &Path,
    breaking: &[Difference],
    harmless: &[Difference],
) -> anyhow::Result<()> {
    let list = |d: &[Difference]| {
        d.iter()
            .map(|(k, a, b)| format!("  {k}: {a} -> {b}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if !breaking.is_empty() {
        anyhow::bail!(
            "cannot resume from {}: the experiment changed in ways the checkpoint cannot follow:\n{}\nstart a new run (another train.run_dir), or use --init-from to keep only the weights",
            checkpoint.display(),
            list(breaking)
        );
    }
    if !harmless.is_empty() {
        println!(
            "resuming with these changes to the experiment:\n{}",
            list(harmless)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_changes_break_and_epoch_changes_do_not() {
        let saved = Experiment::default();
        let mut current = Experiment::default();
        current.train.epochs = 10;
        current.model.num_classes = 11;
        let (breaking, harmless) = compare(&saved, &current);
        assert_eq!(
            breaking,
            [(
                "model.num_classes".to_string(),
                "19".to_string(),
                "11".to_string()
            )]
        );
        assert_eq!(
            harmless,
            [(
                "train.epochs".to_string(),
                "484".to_string(),
                "10".to_string()
            )]
        );
    }

    #[test]
    fn devices_may_trade_for_accumulation() {
        let saved = Experiment {
            device: crate::experiment::DeviceConfig::CpuReplicas(2),
            ..Experiment::default()
        };
        let mut current = Experiment::default();
        current.train.grad_accum = 2;
        let (breaking, _) = compare(&saved, &current);
        assert!(breaking.is_empty(), "{breaking:?}");
        current.train.grad_accum = 3;
        let (breaking, _) = compare(&saved, &current);
        assert_eq!(breaking.len(), 1);
    }
}

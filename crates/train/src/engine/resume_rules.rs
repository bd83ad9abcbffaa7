//! Which experiment changes a resume may carry. Harmless ones (epochs, logging, paths, devices
//! traded for accumulation) are allowed and reported; ones that change what the checkpoint
//! means are refused with the differences listed: the task's own fields (its model, what its
//! batches are made of), the seed that orders the data and draws the per-step randomness, and
//! the number of micro-batches per optimizer step, which the loader position counts.

use serde::Serialize;
use serde_json::Value;

use crate::checkpoint::Checkpoint;

/// One differing field: `(dotted path, checkpoint value, current value)`.
pub type Difference = (String, String, String);

/// The differences between a checkpoint's experiment and the current one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResumeDifferences {
    /// Changes the checkpoint cannot follow: the resume is refused.
    pub breaking: Vec<Difference>,
    /// Changes the resume carries.
    pub harmless: Vec<Difference>,
}

/// Fields every task's resume depends on.
const ENGINE_BREAKING: &[&str] = &["train.seed"];

pub(crate) struct ResumeRules<'a> {
    /// The task's breaking field prefixes (`model.`, `data.ignore_index`).
    pub breaking: &'a [&'a str],
    /// This run's micro-batches per step.
    pub micro_batches_per_step: usize,
}

impl ResumeRules<'_> {
    pub fn compare<E: Serialize>(
        &self,
        checkpoint: &Checkpoint,
        saved: &E,
        current: &E,
    ) -> ResumeDifferences {
        let saved = serde_json::to_value(saved).unwrap_or(Value::Null);
        let current = serde_json::to_value(current).unwrap_or(Value::Null);
        let prefixes: Vec<&str> = ENGINE_BREAKING
            .iter()
            .chain(self.breaking)
            .copied()
            .collect();
        let mut differences = split_differences(&saved, &current, &prefixes);
        // How the micro-batches split into devices × grad_accum may change (a 4-GPU run
        // resumes on one GPU accumulating 4×); their number per step may not.
        let saved_per_step = checkpoint
            .meta
            .state
            .micro_batches_per_step
            .or_else(|| micro_batches_per_step(&saved));
        if let Some(saved_per_step) = saved_per_step {
            if saved_per_step != self.micro_batches_per_step {
                differences.breaking.push((
                    "micro-batches per step (train.grad_accum × devices)".to_string(),
                    saved_per_step.to_string(),
                    self.micro_batches_per_step.to_string(),
                ));
            }
        }
        differences
    }
}

/// `train.grad_accum × devices` of an experiment tree (for checkpoints that predate the
/// recorded number). The `device` section is `Cpu`, `CpuReplicas(n)`, `Cuda(i)` or
/// `Cuda([i, …])` (the cli's `DeviceConfig`).
fn micro_batches_per_step(experiment: &Value) -> Option<usize> {
    let accumulate = experiment.get("train")?.get("grad_accum")?.as_u64()? as usize;
    let devices = match experiment.get("device")? {
        Value::String(_) => 1,
        Value::Object(variant) => match variant.values().next()? {
            Value::Number(n) if variant.contains_key("CpuReplicas") => n.as_u64()? as usize,
            Value::Array(ids) => ids.len(),
            _ => 1,
        },
        _ => return None,
    };
    Some(accumulate * devices)
}

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

/// The differences between two experiment trees, split by `breaking_prefixes`: a field is
/// breaking when its dotted path equals or starts with one (`"model."`, `"train.seed"`).
pub fn split_differences(
    saved: &Value,
    current: &Value,
    breaking_prefixes: &[&str],
) -> ResumeDifferences {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    flatten("", saved, &mut a);
    flatten("", current, &mut b);
    let a: std::collections::BTreeMap<_, _> = a.into_iter().collect();
    let b: std::collections::BTreeMap<_, _> = b.into_iter().collect();
    let mut differences = ResumeDifferences::default();
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let old = a.get(key).cloned().unwrap_or_else(|| "(absent)".into());
        let new = b.get(key).cloned().unwrap_or_else(|| "(absent)".into());
        if old == new {
            continue;
        }
        let is_breaking = breaking_prefixes
            .iter()
            .any(|p| key == p.trim_end_matches('.') || key.starts_with(p));
        let difference = (key.clone(), old, new);
        if is_breaking {
            differences.breaking.push(difference);
        } else {
            differences.harmless.push(difference);
        }
    }
    differences
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_changes_break_and_epoch_changes_do_not() {
        let saved = json!({"model": {"num_classes": 19}, "train": {"epochs": 484, "seed": 304}});
        let current = json!({"model": {"num_classes": 11}, "train": {"epochs": 10, "seed": 304}});
        let differences = split_differences(&saved, &current, &["model.", "train.seed"]);
        let entry = |k: &str, a: &str, b: &str| (k.to_string(), a.to_string(), b.to_string());
        assert_eq!(
            differences.breaking,
            [entry("model.num_classes", "19", "11")]
        );
        assert_eq!(differences.harmless, [entry("train.epochs", "484", "10")]);
    }

    fn checkpoint(recorded: Option<usize>) -> Checkpoint {
        use crate::checkpoint::{CheckpointMeta, TrainState, FORMAT_VERSION};
        use crate::mixed_precision::{LossScaler, LossScalerConfig};
        Checkpoint {
            path: "run/checkpoints/step_00000002.safetensors".into(),
            model: Default::default(),
            optimizer: Default::default(),
            meta: CheckpointMeta {
                format_version: FORMAT_VERSION,
                state: TrainState {
                    step: 2,
                    epoch: 0,
                    batch_in_epoch: 4,
                    seed: 304,
                    loss_scaler: LossScaler::new(LossScalerConfig::default(), false),
                    best_metric: None,
                    history: Vec::new(),
                    micro_batches_per_step: recorded,
                },
                config: String::new(),
                segburn_version: String::new(),
                burn_version: String::new(),
            },
        }
    }

    /// Devices may be traded for accumulation; the micro-batches per step may not change.
    #[test]
    fn devices_may_trade_for_accumulation() {
        let rules = |per_step| ResumeRules {
            breaking: &["model."],
            micro_batches_per_step: per_step,
        };
        let two_devices =
            json!({"train": {"grad_accum": 1, "seed": 304}, "device": {"CpuReplicas": 2}});
        let accumulating = json!({"train": {"grad_accum": 2, "seed": 304}, "device": "Cpu"});
        // Recorded in the checkpoint, or (older files) from its experiment.
        for recorded in [Some(2), None] {
            let same = rules(2).compare(&checkpoint(recorded), &two_devices, &accumulating);
            assert!(same.breaking.is_empty(), "{same:?}");
            let changed: Vec<&str> = same.harmless.iter().map(|(k, _, _)| k.as_str()).collect();
            assert!(changed.contains(&"train.grad_accum"), "{changed:?}");
            assert!(
                changed.iter().any(|k| k.starts_with("device")),
                "{changed:?}"
            );
            let more = rules(3).compare(&checkpoint(recorded), &two_devices, &accumulating);
            assert_eq!(
                more.breaking,
                [(
                    "micro-batches per step (train.grad_accum × devices)".to_string(),
                    "2".to_string(),
                    "3".to_string()
                )]
            );
        }
        let reseeded = json!({"train": {"grad_accum": 2, "seed": 1}, "device": "Cpu"});
        let seed = rules(2).compare(&checkpoint(Some(2)), &accumulating, &reseeded);
        assert_eq!(seed.breaking[0].0, "train.seed");
    }

    #[test]
    fn the_micro_batch_count_comes_from_accumulation_and_devices() {
        let tree = |accumulate: usize, device: Value| json!({"train": {"grad_accum": accumulate}, "device": device});
        assert_eq!(micro_batches_per_step(&tree(2, json!("Cpu"))), Some(2));
        let two = tree(1, json!({"CpuReplicas": 2}));
        assert_eq!(micro_batches_per_step(&two), Some(2));
        let four = tree(3, json!({"Cuda": [0, 1, 2, 3]}));
        assert_eq!(micro_batches_per_step(&four), Some(12));
        assert_eq!(
            micro_batches_per_step(&tree(2, json!({"Cuda": 1}))),
            Some(2)
        );
    }
}

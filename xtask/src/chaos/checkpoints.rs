//! Reading a run's checkpoints back: whether there is one, the newest, and what differs
//! between two (the verdict of every chaos run).

use std::path::Path;

use anyhow::Context;
use segburn_train::checkpoint::{load_checkpoint, Checkpoint, CheckpointDir};

pub fn has_checkpoint(run_dir: &Path) -> bool {
    !CheckpointDir::new(run_dir.join("checkpoints"))
        .list()
        .is_empty()
}

pub fn final_checkpoint(run_dir: &Path) -> anyhow::Result<Checkpoint> {
    let dir = CheckpointDir::new(run_dir.join("checkpoints"));
    let latest = dir
        .latest()
        .with_context(|| format!("no checkpoint in {}", run_dir.display()))?;
    Ok(load_checkpoint(&latest)?)
}

/// The differences that matter between two final checkpoints (empty: bit-identical).
pub fn differences(a: &Checkpoint, b: &Checkpoint) -> Vec<String> {
    let mut found = Vec::new();
    if a.meta.state != b.meta.state {
        found.push(format!(
            "training position {:?} vs {:?}",
            a.meta.state, b.meta.state
        ));
    }
    for (kind, x, y) in [
        ("model", &a.model, &b.model),
        ("optimizer", &a.optimizer, &b.optimizer),
    ] {
        if x.keys().ne(y.keys()) {
            found.push(format!("{kind} keys differ"));
            continue;
        }
        let differing = x
            .iter()
            .filter(|(k, v)| v.as_bytes() != y[*k].as_bytes())
            .count();
        if differing > 0 {
            found.push(format!("{differing} {kind} tensor(s) differ"));
        }
    }
    found
}

//! What the engine reports while it runs, for either task (`L`: the task's loss terms, `V`:
//! its validation report). The binaries render these (progress bars, `--quiet` lines); tests
//! collect them.

use std::path::PathBuf;

/// One optimizer step, as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport<L> {
    pub step: u64,
    pub total_steps: u64,
    pub epoch: u64,
    pub lr: f64,
    /// Loss terms, averaged over the step's micro-batches.
    pub loss: L,
    /// Global gradient norm before clipping (0 when the step had nothing to learn from).
    pub grad_norm: f64,
    pub loss_scale: f64,
    /// Whether the step was skipped (an f16 overflow).
    pub skipped: bool,
    /// Images in the step (all micro-batches, all devices).
    pub images: usize,
    pub seconds: f64,
    pub images_per_second: f64,
    /// Estimated seconds to the end of the run.
    pub eta_seconds: f64,
}

/// Things the loop tells its observer.
#[derive(Debug, Clone)]
pub enum TrainEvent<L, V> {
    /// A free-form message (also written to `train.log`).
    Message(String),
    Step(StepReport<L>),
    Validation {
        step: u64,
        report: Box<V>,
    },
    Checkpoint {
        step: u64,
        path: PathBuf,
        bytes: u64,
        seconds: f64,
    },
}

/// Receives [`TrainEvent`]s.
pub trait Observer<L, V> {
    fn event(&mut self, event: &TrainEvent<L, V>);
}

/// Discards events (the files in the run directory still get everything).
pub struct Silent;

impl<L, V> Observer<L, V> for Silent {
    fn event(&mut self, _: &TrainEvent<L, V>) {}
}

impl<L, V, F: FnMut(&TrainEvent<L, V>)> Observer<L, V> for F {
    fn event(&mut self, event: &TrainEvent<L, V>) {
        self(event)
    }
}

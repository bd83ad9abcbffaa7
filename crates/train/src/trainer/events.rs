//! What the training loop reports while it runs. The binary renders these (progress bars,
//! `--quiet` lines); tests collect them.

use std::path::PathBuf;

use crate::loss::PidNetLossValues;
use crate::metric::MetricReport;

/// One optimizer step, as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    pub step: u64,
    pub total_steps: u64,
    pub epoch: u64,
    pub lr: f64,
    /// Loss terms, averaged over the step's micro-batches.
    pub loss: PidNetLossValues,
    pub grad_norm: f64,
    pub loss_scale: f64,
    /// Whether the step was skipped (f16 overflow).
    pub skipped: bool,
    pub images_per_second: f64,
    /// Estimated seconds to `total_steps`.
    pub eta_seconds: f64,
}

/// Things the loop tells its observer.
#[derive(Debug, Clone)]
pub enum TrainEvent {
    /// A free-form message (also written to `train.log`).
    Message(String),
    Step(StepReport),
    Validation {
        step: u64,
        report: Box<MetricReport>,
    },
    Checkpoint {
        step: u64,
        path: PathBuf,
        bytes: u64,
        seconds: f64,
    },
}

/// Receives [`TrainEvent`]s.
pub trait Observer {
    fn event(&mut self, event: &TrainEvent);
}

/// Discards events (the files in the run directory still get everything).
pub struct Silent;

impl Observer for Silent {
    fn event(&mut self, _: &TrainEvent) {}
}

impl<F: FnMut(&TrainEvent)> Observer for F {
    fn event(&mut self, event: &TrainEvent) {
        self(event)
    }
}

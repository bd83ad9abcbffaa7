//! What the SAM2 loop reports while it runs; the binary renders these, tests collect them.

use std::path::PathBuf;

use super::eval::Sam2EvalReport;

/// The loss terms of one step (summed over prediction steps, as SAM2 does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sam2LossValues {
    /// `core_loss`: the weighted sum that is backpropagated.
    pub total: f64,
    pub mask: f64,
    pub dice: f64,
    pub iou: f64,
    pub class: f64,
}

/// One optimizer step.
#[derive(Debug, Clone, PartialEq)]
pub struct Sam2StepReport {
    pub step: u64,
    pub total_steps: u64,
    pub epoch: u64,
    pub lr: f64,
    /// `None` when the batch had no object (the step changes nothing).
    pub loss: Option<Sam2LossValues>,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub images: usize,
    pub objects: usize,
    pub seconds: f64,
    /// Estimated seconds to the end of the run.
    pub eta_seconds: f64,
    /// The loss scaler found a non-finite gradient (F16) and the step changed nothing.
    pub skipped: bool,
}

/// Things the loop tells its observer.
#[derive(Debug, Clone)]
pub enum Sam2Event {
    /// A free-form message (also written to `train.log`).
    Message(String),
    Step(Sam2StepReport),
    Validation {
        step: u64,
        report: Sam2EvalReport,
    },
    Checkpoint {
        step: u64,
        path: PathBuf,
        bytes: u64,
        seconds: f64,
    },
}

/// Receives [`Sam2Event`]s.
pub trait Sam2Observer {
    fn event(&mut self, event: &Sam2Event);
}

impl<F: FnMut(&Sam2Event)> Sam2Observer for F {
    fn event(&mut self, event: &Sam2Event) {
        self(event)
    }
}

//! A request to stop training at the next optimizer-step boundary. The binaries raise it from
//! their Ctrl-C / SIGTERM handler, tests from an observer; the trainers check it after every
//! step, write a checkpoint and return, so an interrupted run resumes exactly.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Shared between whoever asks for the stop and the trainer that honours it (clones share
/// one flag).
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the run to stop after the step in progress.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The run-log line of a run stopped on request.
pub(crate) fn stopped_message(step: u64, checkpoint: Option<&Path>) -> String {
    match checkpoint {
        Some(path) => format!(
            "stopped on request after step {step}; the run continues from {}",
            path.display()
        ),
        None => "stopped on request before the first step; nothing to save".to_string(),
    }
}

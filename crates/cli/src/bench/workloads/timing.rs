//! Median-of-N wall-clock timing after warm-ups.

use std::time::Instant;

use segburn_train::compute_threads::on_compute_pool;
use serde::Serialize;

/// Wall-clock times of repeated runs.
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    pub runs_ms: Vec<f64>,
    pub median_ms: f64,
    pub min_ms: f64,
}

impl Timing {
    /// Median and minimum of `runs_ms` (kept in run order); `None` when there is no run.
    pub fn from_runs(runs_ms: Vec<f64>) -> Option<Self> {
        let mut sorted = runs_ms.clone();
        sorted.sort_by(f64::total_cmp);
        Some(Timing {
            median_ms: *sorted.get(sorted.len() / 2)?,
            min_ms: *sorted.first()?,
            runs_ms,
        })
    }
}

/// Runs `f` `warmups` times untimed, then `reps` times timed, each run on a compute-pool
/// thread as the trainer's steps and the inference modes run (`on_compute_pool`).
pub fn measure(warmups: usize, reps: usize, mut f: impl FnMut() + Send) -> Timing {
    let mut f = || on_compute_pool(&mut f);
    for _ in 0..warmups {
        f();
    }
    let runs_ms: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    Timing::from_runs(runs_ms).expect("at least one timed run")
}

//! Median-of-N wall-clock timing after warm-ups.

use std::time::Instant;

use serde::Serialize;

/// Wall-clock times of repeated runs.
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    pub runs_ms: Vec<f64>,
    pub median_ms: f64,
    pub min_ms: f64,
}

/// Runs `f` `warmups` times untimed, then `reps` times timed.
pub fn measure(warmups: usize, reps: usize, mut f: impl FnMut()) -> Timing {
    for _ in 0..warmups {
        f();
    }
    let mut runs_ms: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let recorded = runs_ms.clone();
    runs_ms.sort_by(f64::total_cmp);
    Timing {
        median_ms: runs_ms[runs_ms.len() / 2],
        min_ms: runs_ms[0],
        runs_ms: recorded,
    }
}

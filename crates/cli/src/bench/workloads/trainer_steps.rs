//! Seconds per optimizer step of a real training run (loader, forward, loss, backward,
//! optimizer), either plain or through the data-parallel replica path on the same single
//! device. The difference is what the data-parallel machinery costs: the worker thread, the
//! hand-over of batches and the all-reduce (a mean over one replica).

use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;
use segburn_train::engine::{Observer, TrainError, TrainEvent};
use segburn_train::pidnet::{PidNetSetup, PidNetTrainer};

use super::pidnet_precision::Repeats;
use super::timing::Timing;

/// Records when each step ends.
#[derive(Default)]
struct StepClock(Vec<Instant>);

impl<L, V> Observer<L, V> for StepClock {
    fn event(&mut self, event: &TrainEvent<L, V>) {
        if let TrainEvent::Step(_) = event {
            self.0.push(Instant::now());
        }
    }
}

/// Times `repeats.reps` steps of `setup` after `repeats.warmups` (at least one: the first step
/// also starts the loader and, when `replicated`, the replica). Validation is switched off; a
/// checkpoint is written to `setup.train.run_dir` after the timed steps.
pub fn trainer_step_timing<B: AutodiffBackend>(
    mut setup: PidNetSetup,
    device: B::Device,
    replicated: bool,
    repeats: Repeats,
) -> Result<Timing, TrainError> {
    let warmups = repeats.warmups.max(1);
    let reps = repeats.reps.max(1);
    let train = &mut setup.train;
    train.max_steps = Some((warmups + reps) as u64);
    train.validate_at_end = false;
    train.validate_every_epochs = 0;
    train.validate_every_steps = None;
    train.checkpoint_every_steps = None;
    let mut trainer = PidNetTrainer::<B>::new(setup, device)?.replicate_single_device(replicated);
    if trainer.total_steps() < (warmups + reps) as u64 {
        return Err(TrainError::Config(format!(
            "the benchmark needs {} steps but the run has only {}; raise train.epochs",
            warmups + reps,
            trainer.total_steps()
        )));
    }
    let mut clock = StepClock::default();
    trainer.run(&mut clock)?;
    // Step k (k ≥ 2) took clock[k-1] − clock[k-2]; the first `warmups` steps are not timed.
    let runs_ms: Vec<f64> = clock
        .0
        .windows(2)
        .skip(warmups - 1)
        .map(|pair| (pair[1] - pair[0]).as_secs_f64() * 1e3)
        .collect();
    Timing::from_runs(runs_ms).ok_or_else(|| TrainError::Config("no step was timed".into()))
}

//! The schedule every trainer follows: optimizer steps until the end of the run, epoch by
//! epoch from the saved position, with the logging, validation and checkpoint cadence, a
//! checkpoint at each epoch's end, and the final validation and save. A [`StopSignal`] ends it
//! early at a step boundary, with a checkpoint. The engine supplies what a step, a validation
//! and a save are.

use std::time::Instant;

use crate::checkpoint::TrainState;
use crate::stop_signal::StopSignal;

/// When to log, validate and save.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cadence {
    /// The step the run stops at (all epochs, or `max_steps`).
    pub stop_at: u64,
    /// Micro-batches the loader yields per epoch for whole optimizer steps (an epoch ends at
    /// this `batch_in_epoch`).
    pub batches_per_epoch: u64,
    pub log_every_steps: u64,
    pub validate_every_steps: Option<u64>,
    pub checkpoint_every_steps: Option<u64>,
    /// Validate after every N finished epochs (0: never at epoch ends).
    pub validate_every_epochs: u64,
    pub validate_at_end: bool,
}

/// What the schedule needs from a run.
pub(crate) trait Schedulable {
    type Error;
    /// One epoch's batches, from the saved position.
    type Batches;
    type Report;
    type Validation;

    fn state(&self) -> &TrainState;
    fn state_mut(&mut self) -> &mut TrainState;
    /// The loader's batches of the current epoch from `batch_in_epoch` on.
    fn open_epoch(&mut self) -> Self::Batches;
    /// One optimizer step (it advances `step` and `batch_in_epoch`).
    fn step(&mut self, batches: &mut Self::Batches) -> Result<Self::Report, Self::Error>;
    /// Hands a step's report on (`log`: whether the run log gets a line for it).
    fn report(&mut self, report: Self::Report, log: bool) -> Result<(), Self::Error>;
    fn validate(&mut self) -> Result<Self::Validation, Self::Error>;
    fn save(&mut self) -> Result<(), Self::Error>;
    /// Called once after the last step, before the final validation and save.
    fn finish_steps(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// How a schedule ended.
#[derive(Debug)]
pub(crate) enum ScheduleEnd<V> {
    /// At `stop_at`, with the final validation if one ran at the end.
    Finished(Option<V>),
    /// Early, on a [`StopSignal`]: the last step taken is saved (unless no step was taken).
    Stopped,
}

/// Runs `trainer` to `cadence.stop_at`, or to the first step boundary after `stop` is raised.
pub(crate) fn run_schedule<T: Schedulable>(
    trainer: &mut T,
    cadence: &Cadence,
    stop: &StopSignal,
) -> Result<ScheduleEnd<T::Validation>, T::Error> {
    let first_step = trainer.state().step;
    let mut saved_at = None;
    // A run stopped right after a validation resumes without repeating it at the epoch's end.
    let mut validated_at = trainer
        .state()
        .history
        .last()
        .map(|&(step, _)| step)
        .filter(|&step| step == first_step);
    let in_epoch = |t: &T| (t.state().batch_in_epoch as u64) < cadence.batches_per_epoch;
    while trainer.state().step < cadence.stop_at {
        if stop.is_requested() {
            // The epoch's end (its validation and epoch counter) is left to the resumed run,
            // which then does exactly what an uninterrupted one would have.
            trainer.finish_steps()?;
            let step = trainer.state().step;
            if step > first_step && saved_at != Some(step) {
                trainer.save()?;
            }
            return Ok(ScheduleEnd::Stopped);
        }
        let mut batches = trainer.open_epoch();
        while trainer.state().step < cadence.stop_at && in_epoch(trainer) && !stop.is_requested() {
            let report = trainer.step(&mut batches)?;
            let step = trainer.state().step;
            let log = step.is_multiple_of(cadence.log_every_steps) || step == cadence.stop_at;
            trainer.report(report, log)?;
            if cadence
                .validate_every_steps
                .is_some_and(|n| step.is_multiple_of(n))
            {
                trainer.validate()?;
                validated_at = Some(step);
                trainer.save()?;
                saved_at = Some(step);
            } else if cadence
                .checkpoint_every_steps
                .is_some_and(|n| step.is_multiple_of(n))
            {
                trainer.save()?;
                saved_at = Some(step);
            }
        }
        drop(batches);
        if stop.is_requested() {
            continue;
        }
        if !in_epoch(trainer) {
            let state = trainer.state_mut();
            state.epoch += 1;
            state.batch_in_epoch = 0;
            let (finished_epochs, step) = (state.epoch, state.step);
            if cadence.validate_every_epochs > 0
                && finished_epochs.is_multiple_of(cadence.validate_every_epochs)
                && validated_at != Some(step)
            {
                trainer.validate()?;
                validated_at = Some(step);
            }
            if saved_at != Some(step) {
                trainer.save()?;
                saved_at = Some(step);
            }
        }
    }
    trainer.finish_steps()?;
    let step = trainer.state().step;
    let mut final_validation = None;
    if cadence.validate_at_end && validated_at != Some(step) {
        final_validation = Some(trainer.validate()?);
    }
    if saved_at != Some(step) || final_validation.is_some() {
        trainer.save()?;
    }
    Ok(ScheduleEnd::Finished(final_validation))
}

/// Estimates the time left from the steps done in this process.
pub(crate) struct StepTimer {
    started: Instant,
    first_step: u64,
}

impl StepTimer {
    pub(crate) fn new(first_step: u64) -> Self {
        Self {
            started: Instant::now(),
            first_step,
        }
    }

    pub(crate) fn eta(&self, step: u64, stop_at: u64) -> f64 {
        let done = step.saturating_sub(self.first_step).max(1) as f64;
        let per_step = self.started.elapsed().as_secs_f64() / done;
        per_step * stop_at.saturating_sub(step) as f64
    }
}

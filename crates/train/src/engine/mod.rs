//! The training engine, one for every task: batch → forward (in the configured precision) →
//! loss (f32) → scaled backward → accumulate `grad_accum` micro-batches (on each of the
//! data-parallel replicas) → unscale, finite check, clip → optimizer step → LR schedule → log →
//! periodic validation → periodic checkpoint.
//!
//! A task ([`Task`]: PIDNet in `crate::pidnet`, SAM2 in `crate::sam2`) supplies its model,
//! batches, one micro-batch's loss and its validation; the engine owns everything else, so both
//! tasks get accumulation, replicas, mixed precision, cadence, logs, checkpoints and exact
//! resume from the same code.
//!
//! Everything a resume needs is in the checkpoint: model, optimizer state, step, epoch and
//! batch position, seed and loss-scaler state. The data order and augmentation are pure
//! functions of `(seed, epoch, index)`, per-step draws of `(seed, step, micro-batch)` and the
//! learning rate a pure function of the step, so a resumed run sees exactly the batches and
//! learning rates an uninterrupted one would.

mod accumulate;
mod checkpoints;
mod config;
mod error;
mod events;
pub(crate) mod initial_weights;
mod replica_worker;
pub(crate) mod replicas;
mod reports;
mod resume_rules;
mod run_log;
mod run_loop;
mod start;
mod step;
mod task;

pub use accumulate::accumulate_gradients;
pub use config::{TrainConfig, TrainConfigError, TrainRecipe};
pub use error::TrainError;
pub use events::{Observer, Silent, StepReport, TrainEvent};
pub use resume_rules::{Difference, ResumeDifferences};
pub use run_log::{MetricsRow, RunLog};
pub use task::{
    Batch, LossTerms, MicroBatch, MicroBatchLoss, Model, Task, TaskStep, Terms, ValidationReport,
};

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;
use segburn_models::tensor_file::NamedTensors;

use crate::checkpoint::{CheckpointDir, RunDirLock, TrainState};
use crate::optim::{OptimizerSet, ParamInfo};
use crate::stop_signal::{stopped_message, StopSignal};
use replicas::{ReplicaPool, ReplicaSource};
use run_loop::{run_schedule, Cadence, Schedulable, ScheduleEnd, StepTimer};

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary<V> {
    pub steps: u64,
    /// Whether a [`StopSignal`] ended the run before its configured end.
    pub stopped: bool,
    pub last_checkpoint: Option<PathBuf>,
    pub final_report: Option<V>,
    pub seconds: f64,
}

/// The events a task's run sends.
pub type TaskEvent<B, T> = TrainEvent<Terms<B, T>, <T as Task<B>>::Validation>;
/// What observes a task's run.
pub type TaskObserver<'a, B, T> = dyn Observer<Terms<B, T>, <T as Task<B>>::Validation> + 'a;

/// A training run of task `T` on backend `B`.
pub struct Engine<B: AutodiffBackend, T: Task<B>> {
    task: T,
    step_fn: T::Step,
    model: Option<Model<B, T>>,
    optimizer: OptimizerSet<Model<B, T>, B>,
    params: Vec<ParamInfo>,
    train: TrainConfig<T::Recipe>,
    /// The fully resolved experiment as text, stored in every checkpoint.
    experiment_text: String,
    state: TrainState,
    device: B::Device,
    /// All devices of a data-parallel run (the first is `device`); one for a plain run.
    devices: Vec<B::Device>,
    /// Train through the replica pool even on one device (measures its overhead).
    replicate_single_device: bool,
    replicas: Option<ReplicaPool<B, T::Step>>,
    checkpoints: CheckpointDir,
    log: RunLog,
    last_checkpoint: Option<PathBuf>,
    stop: StopSignal,
    /// Held while the engine lives: one run per run directory.
    _lock: RunDirLock,
}

fn log_error(dir: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Log {
        path: dir.to_path_buf(),
        source,
    }
}

impl<B: AutodiffBackend, T: Task<B>> Engine<B, T> {
    /// Stops the run at the next step boundary, with a checkpoint, once `stop` is raised.
    pub fn with_stop_signal(mut self, stop: StopSignal) -> Self {
        self.stop = stop;
        self
    }

    /// Trains a single device through the data-parallel path too (a worker thread and the
    /// all-reduce), as `device: CpuReplicas(1)` or `Cuda([0])` ask: the same steps, plus the
    /// machinery's overhead, which `bench` measures this way.
    pub fn replicate_single_device(mut self, replicate: bool) -> Self {
        self.replicate_single_device = replicate;
        self
    }

    /// The task (its data, configuration and validation).
    pub fn task(&self) -> &T {
        &self.task
    }

    /// The model (between steps).
    pub fn model(&self) -> &Model<B, T> {
        self.model
            .as_ref()
            .expect("the model is only taken out during a step")
    }

    pub fn state(&self) -> &TrainState {
        &self.state
    }

    pub fn train_config(&self) -> &TrainConfig<T::Recipe> {
        &self.train
    }

    pub fn checkpoint_dir(&self) -> &CheckpointDir {
        &self.checkpoints
    }

    /// The parameters the optimizer trains.
    pub fn trained_params(&self) -> &[ParamInfo] {
        &self.params
    }

    /// The optimizer state as it would be saved.
    pub fn optimizer_state(&self) -> Result<NamedTensors, TrainError> {
        match &self.replicas {
            Some(pool) => pool.optimizer_state(),
            None => Ok(self.optimizer.export(&self.device)),
        }
    }

    /// Micro-batches per optimizer step: `grad_accum` on each device. The loader position
    /// counts micro-batches, so a resume must keep this number (see `resume_rules.rs`).
    pub fn micro_batches_per_step(&self) -> usize {
        self.train.grad_accum * self.devices.len()
    }

    /// Optimizer steps per epoch: whole groups of micro-batches.
    pub fn steps_per_epoch(&self) -> u64 {
        (self.task.batches_per_epoch() / self.micro_batches_per_step()) as u64
    }

    /// The schedule's horizon.
    pub fn total_steps(&self) -> u64 {
        self.train.epochs * self.steps_per_epoch()
    }

    /// The step the run stops at (`max_steps` or the horizon).
    pub fn stop_step(&self) -> u64 {
        let total = self.total_steps();
        self.train.max_steps.map_or(total, |m| m.min(total))
    }

    fn replicated(&self) -> bool {
        self.devices.len() > 1 || self.replicate_single_device
    }

    /// With replicas, takes replica 0's current model (parameters and BatchNorm statistics) as
    /// this run's model, for validation, checkpoints and callers.
    fn refresh_model_from_replicas(&mut self) -> Result<(), TrainError> {
        if let Some(pool) = &self.replicas {
            self.model = Some(pool.model()?);
        }
        Ok(())
    }

    fn say(
        &mut self,
        observer: &mut TaskObserver<'_, B, T>,
        message: String,
    ) -> Result<(), TrainError> {
        self.log.line(&message).map_err(log_error(self.log.dir()))?;
        observer.event(&TrainEvent::Message(message));
        Ok(())
    }

    /// Trains until the configured end (all epochs, or `max_steps`).
    pub fn run(
        &mut self,
        observer: &mut TaskObserver<'_, B, T>,
    ) -> Result<RunSummary<T::Validation>, TrainError> {
        let started = Instant::now();
        let steps_per_epoch = self.steps_per_epoch();
        let total = self.total_steps();
        let stop_at = self.stop_step();
        if self.replicated() && self.replicas.is_none() {
            let optimizer_state = self.optimizer.export(&self.device);
            let source = ReplicaSource {
                task: &self.task,
                model: self.model(),
                optimizer_state: &optimizer_state,
            };
            self.replicas = Some(ReplicaPool::spawn(source, &self.devices)?);
        }
        let train = self.train.clone();
        let message = format!(
            "training {} for steps {}..{stop_at} of {total} ({steps_per_epoch} per epoch, {} \
             micro-batch(es) per step on each of {} device(s){}), precision {:?}, run dir {}",
            self.task.describe(),
            self.state.step,
            train.grad_accum,
            self.devices.len(),
            if self.replicated() {
                " as data-parallel replicas"
            } else {
                ""
            },
            train.precision,
            train.run_dir.display()
        );
        self.say(observer, message)?;
        let cadence = Cadence {
            stop_at,
            batches_per_epoch: steps_per_epoch * self.micro_batches_per_step() as u64,
            log_every_steps: train.log_every_steps,
            validate_every_steps: train.validate_every_steps,
            checkpoint_every_steps: train.checkpoint_every_steps,
            validate_every_epochs: train.validate_every_epochs,
            validate_at_end: train.validate_at_end,
        };
        let timer = StepTimer::new(self.state.step);
        let stop = self.stop.clone();
        let mut run = Run {
            engine: self,
            observer,
            total,
            stop_at,
            timer,
        };
        let end = run_schedule(&mut run, &cadence, &stop)?;
        let (final_report, stopped) = match end {
            ScheduleEnd::Finished(report) => (report, false),
            ScheduleEnd::Stopped => {
                let message = stopped_message(self.state.step, self.last_checkpoint.as_deref());
                self.say(observer, message)?;
                (None, true)
            }
        };
        Ok(RunSummary {
            steps: self.state.step,
            stopped,
            last_checkpoint: self.last_checkpoint.clone(),
            final_report,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// A run as the shared schedule sees it.
struct Run<'a, 'o, B: AutodiffBackend, T: Task<B>> {
    engine: &'a mut Engine<B, T>,
    observer: &'a mut TaskObserver<'o, B, T>,
    total: u64,
    stop_at: u64,
    timer: StepTimer,
}

impl<B: AutodiffBackend, T: Task<B>> Schedulable for Run<'_, '_, B, T> {
    type Error = TrainError;
    type Batches = T::Epoch;
    type Report = StepReport<Terms<B, T>>;
    type Validation = T::Validation;

    fn state(&self) -> &TrainState {
        &self.engine.state
    }

    fn state_mut(&mut self) -> &mut TrainState {
        &mut self.engine.state
    }

    fn open_epoch(&mut self) -> T::Epoch {
        let state = &self.engine.state;
        self.engine.task.epoch(state.epoch, state.batch_in_epoch)
    }

    fn step(&mut self, batches: &mut T::Epoch) -> Result<Self::Report, TrainError> {
        self.engine
            .train_step(batches, self.total, &self.timer, self.stop_at)
    }

    fn report(&mut self, report: Self::Report, log: bool) -> Result<(), TrainError> {
        if log {
            self.engine.log_step(&report)?;
        }
        self.observer.event(&TrainEvent::Step(report));
        Ok(())
    }

    fn validate(&mut self) -> Result<T::Validation, TrainError> {
        self.engine.validate_and_record(self.observer)
    }

    fn save(&mut self) -> Result<(), TrainError> {
        self.engine.save(self.observer).map(drop)
    }

    fn finish_steps(&mut self) -> Result<(), TrainError> {
        self.engine.refresh_model_from_replicas()
    }
}

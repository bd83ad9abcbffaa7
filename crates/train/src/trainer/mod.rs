//! The training loop: batch → forward (in the configured precision) → losses (f32) → scaled
//! backward → accumulate `grad_accum` micro-batches → unscale, finite check, clip → optimizer
//! step → LR schedule → log → periodic validation → periodic checkpoint.
//!
//! Everything a resume needs is in the checkpoint: model, optimizer state, step, epoch and
//! batch position, seed and loss-scaler state. The data order and augmentation are pure
//! functions of `(seed, epoch, index)` and the learning rate a pure function of the step, so a
//! resumed run sees exactly the batches and learning rates an uninterrupted one would.

mod accumulate;
mod batch_tensors;
mod config;
mod error;
mod events;
mod micro_batch;
mod replicas;
mod run_log;
mod step;
mod validation;
mod weights;

pub use accumulate::accumulate_gradients;
pub use batch_tensors::DeviceBatch;
pub use config::{resolve_class_weights, TrainConfig};
pub use error::TrainError;
pub use events::{Observer, Silent, StepReport, TrainEvent};
pub use run_log::{MetricsRow, RunLog};

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;
use segburn_data::{DataConfig, DatasetIndex, EpochIter, Loader, Mode};
use segburn_models::pidnet::{official_key, pidnet_state_dict, PidNet, PidNetConfig};
use segburn_models::tensor_file::NamedTensors;

use crate::checkpoint::{CheckpointDir, RunDirLock, SavedCheckpoint, TrainState};
use crate::loss::{PidNetLoss, PidNetLossConfig};
use crate::metric::MetricReport;
use crate::mixed_precision::LossScaler;
use crate::optim::{list_params, OptimizerSet, ParamInfo};
use crate::run_schedule::{run_schedule, Cadence, Schedulable, ScheduleEnd, StepTimer};
use crate::stop_signal::{stopped_message, StopSignal};
use replicas::{ReplicaPool, ReplicaSource};

/// The pieces of an experiment the trainer needs.
#[derive(Debug, Clone)]
pub struct TrainerSetup {
    pub model: PidNetConfig,
    pub data: DataConfig,
    pub loss: PidNetLossConfig,
    pub train: TrainConfig,
    /// The fully resolved experiment as text, stored in every checkpoint.
    pub experiment_text: String,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub steps: u64,
    /// Whether a [`StopSignal`] ended the run before its configured end.
    pub stopped: bool,
    pub last_checkpoint: Option<PathBuf>,
    pub final_report: Option<MetricReport>,
    pub seconds: f64,
}

/// A PIDNet training run.
pub struct Trainer<B: AutodiffBackend> {
    model: Option<PidNet<B>>,
    optimizer: OptimizerSet<PidNet<B>, B>,
    params: Vec<ParamInfo>,
    loss: PidNetLoss,
    train_loader: Loader,
    val_loader: Option<Loader>,
    setup: TrainerSetup,
    state: TrainState,
    device: B::Device,
    /// All devices of a data-parallel run (the first is `device`); one for a plain run.
    devices: Vec<B::Device>,
    /// Train through the replica pool even on one device (measures its overhead).
    replicate_single_device: bool,
    replicas: Option<ReplicaPool<B>>,
    checkpoints: CheckpointDir,
    log: RunLog,
    class_names: Vec<String>,
    last_checkpoint: Option<PathBuf>,
    stop: StopSignal,
    /// Held while the trainer lives: one run per run directory.
    _lock: RunDirLock,
}

fn log_error(dir: &Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
    move |source| TrainError::Log {
        path: dir.to_path_buf(),
        source,
    }
}

impl<B: AutodiffBackend> Trainer<B> {
    /// Indexes the data, builds the model (freshly initialised) and the optimizer.
    pub fn new(setup: TrainerSetup, device: B::Device) -> Result<Self, TrainError> {
        Self::with_devices(setup, vec![device])
    }

    /// A data-parallel run over `devices` (one replica and one worker thread each; see
    /// `replicas.rs`). Each optimizer step takes `grad_accum` micro-batches per device. One
    /// device trains on the calling thread, without the replica machinery.
    pub fn with_devices(
        mut setup: TrainerSetup,
        devices: Vec<B::Device>,
    ) -> Result<Self, TrainError> {
        let Some(device) = devices.first().cloned() else {
            return Err(TrainError::Config("no device to train on".into()));
        };
        setup.data.check()?;
        setup.train.check().map_err(TrainError::Config)?;
        setup.loss.validate()?;
        // Normally done by the caller already, so that the recorded experiment has them.
        resolve_class_weights(&mut setup.loss, &setup.data)?;
        let data = &setup.data;
        let train_index = DatasetIndex::new(&data.layout, &data.train_split, data.ignore_index)?;
        let class_names = train_index.label_map().classes().to_vec();
        if class_names.len() != setup.model.num_classes {
            return Err(TrainError::Config(format!(
                "model.num_classes is {} but the dataset has {} classes ({})",
                setup.model.num_classes,
                class_names.len(),
                train_index.label_map().description()
            )));
        }
        let seed = setup.train.seed;
        let train_loader = Loader::new(train_index, data, Mode::Train, seed)?;
        let wants_validation = setup.train.validate_at_end
            || setup.train.validate_every_epochs > 0
            || setup.train.validate_every_steps.is_some();
        let val_loader = if wants_validation {
            let index = DatasetIndex::new(&data.layout, &data.val_split, data.ignore_index)?;
            Some(Loader::new(index, data, Mode::Validation, seed)?)
        } else {
            None
        };
        // Seed the backend so a fresh run starts from the same initial weights every time.
        B::seed(&device, seed);
        let model = setup.model.init::<B>(&device);
        initialize_now(&model);
        let params = list_params(&model, &official_key);
        let optimizer =
            OptimizerSet::new(&setup.train.optimizer, &setup.train.param_groups, &params);
        let state = TrainState {
            step: 0,
            epoch: 0,
            batch_in_epoch: 0,
            seed,
            loss_scaler: LossScaler::new(
                setup.train.loss_scaler.clone(),
                setup.train.precision.uses_loss_scaling(),
            ),
            best_metric: None,
            history: Vec::new(),
        };
        let run_dir = setup.train.run_dir.clone();
        let lock = RunDirLock::acquire(&run_dir)?;
        let log = RunLog::open(&run_dir).map_err(log_error(&run_dir))?;
        Ok(Self {
            model: Some(model),
            optimizer,
            params,
            loss: PidNetLoss::new(setup.loss.clone())?,
            train_loader,
            val_loader,
            checkpoints: CheckpointDir::of_run(&run_dir),
            setup,
            state,
            device,
            devices,
            replicate_single_device: false,
            replicas: None,
            log,
            class_names,
            last_checkpoint: None,
            stop: StopSignal::new(),
            _lock: lock,
        })
    }

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

    /// The model (between steps).
    pub fn model(&self) -> &PidNet<B> {
        self.model
            .as_ref()
            .expect("the model is only taken out during a step")
    }

    pub fn state(&self) -> &TrainState {
        &self.state
    }

    pub fn checkpoint_dir(&self) -> &CheckpointDir {
        &self.checkpoints
    }

    /// The optimizer state as it would be saved.
    pub fn optimizer_state(&self) -> Result<NamedTensors, TrainError> {
        match &self.replicas {
            Some(pool) => pool.optimizer_state(),
            None => Ok(self.optimizer.export(&self.device)),
        }
    }

    /// Micro-batches per optimizer step: `grad_accum` on each device.
    fn micro_batches_per_step(&self) -> usize {
        self.setup.train.grad_accum * self.devices.len()
    }

    /// Optimizer steps per epoch: whole groups of micro-batches.
    pub fn steps_per_epoch(&self) -> u64 {
        (self.train_loader.batches_per_epoch() / self.micro_batches_per_step()) as u64
    }

    /// With replicas, takes replica 0's current model (parameters and BatchNorm statistics) as
    /// this trainer's model, for validation, checkpoints and callers.
    fn refresh_model_from_replicas(&mut self) -> Result<(), TrainError> {
        if let Some(pool) = &self.replicas {
            self.model = Some(pool.model()?);
        }
        Ok(())
    }

    /// The schedule's horizon.
    pub fn total_steps(&self) -> u64 {
        self.setup.train.epochs * self.steps_per_epoch()
    }

    fn say(&mut self, observer: &mut dyn Observer, message: String) -> Result<(), TrainError> {
        self.log.line(&message).map_err(log_error(self.log.dir()))?;
        observer.event(&TrainEvent::Message(message));
        Ok(())
    }

    /// Trains until the configured end (all epochs, or `max_steps`).
    pub fn run(&mut self, observer: &mut dyn Observer) -> Result<RunSummary, TrainError> {
        let started = Instant::now();
        let train = self.setup.train.clone();
        let steps_per_epoch = self.steps_per_epoch();
        if steps_per_epoch == 0 {
            return Err(TrainError::TooFewBatches {
                batches: self.train_loader.batches_per_epoch(),
                batch_size: self.setup.data.train_loader.batch_size,
                grad_accum: train.grad_accum,
            });
        }
        let total = self.total_steps();
        let stop_at = train.max_steps.map_or(total, |m| m.min(total));
        let replicated = self.devices.len() > 1 || self.replicate_single_device;
        if replicated && self.replicas.is_none() {
            let optimizer_state = self.optimizer.export(&self.device);
            let source = ReplicaSource {
                model: self.model(),
                model_config: &self.setup.model,
                optimizer_state: &optimizer_state,
                optimizer: &train.optimizer,
                groups: &train.param_groups,
                loss: &self.loss,
            };
            self.replicas = Some(ReplicaPool::spawn(source, &self.devices)?);
        }
        self.say(
            observer,
            format!(
                "training PIDNet-{:?} ({} classes) for steps {}..{} of {} ({} per epoch, {} micro-batch(es) of {} per step on each of {} device(s){}), precision {:?}, run dir {}",
                self.setup.model.size,
                self.setup.model.num_classes,
                self.state.step,
                stop_at,
                total,
                steps_per_epoch,
                train.grad_accum,
                self.setup.data.train_loader.batch_size,
                self.devices.len(),
                if replicated {
                    " as data-parallel replicas"
                } else {
                    ""
                },
                train.precision,
                train.run_dir.display()
            ),
        )?;
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
        let mut run = PidNetRun {
            trainer: self,
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

    fn log_step(&mut self, report: &StepReport) -> Result<(), TrainError> {
        let l = report.loss;
        let line = format!(
            "step {}/{} epoch {} lr {:.3e} loss {:.4} (aux {:.4} main {:.4} boundary {:.4} bas {:.4}) grad-norm {:.3} scale {} {:.2} img/s{}",
            report.step,
            report.total_steps,
            report.epoch,
            report.lr,
            l.total,
            l.aux,
            l.main,
            l.boundary,
            l.bas,
            report.grad_norm,
            report.loss_scale,
            report.images_per_second,
            if report.skipped { " [skipped: gradient overflow]" } else { "" }
        );
        self.log.line(&line).map_err(log_error(self.log.dir()))?;
        let row = MetricsRow {
            kind: "train",
            step: report.step,
            epoch: report.epoch,
            lr: report.lr,
            loss: Some(l.total),
            loss_aux: Some(l.aux),
            loss_main: Some(l.main),
            loss_boundary: Some(l.boundary),
            loss_bas: Some(l.bas),
            grad_norm: Some(report.grad_norm),
            loss_scale: Some(report.loss_scale),
            images_per_second: Some(report.images_per_second),
            mean_iou: None,
            pixel_accuracy: None,
        };
        self.log.metrics(&row).map_err(log_error(self.log.dir()))
    }

    /// Saves a checkpoint of the current state, updates the pointers and rotates old files.
    pub fn save(&mut self, observer: &mut dyn Observer) -> Result<PathBuf, TrainError> {
        self.refresh_model_from_replicas()?;
        let step = self.state.step;
        let model = pidnet_state_dict(self.model());
        let optimizer = self.optimizer_state()?;
        let SavedCheckpoint {
            path,
            bytes,
            seconds,
        } = self.checkpoints.save_step(
            &self.state,
            &self.setup.experiment_text,
            &model,
            &optimizer,
            &self.setup.train.retention,
        )?;
        self.last_checkpoint = Some(path.clone());
        let message = format!(
            "saved {} ({:.1} MB, {seconds:.2} s)",
            path.display(),
            bytes as f64 / 1e6
        );
        self.log.line(&message).map_err(log_error(self.log.dir()))?;
        observer.event(&TrainEvent::Checkpoint {
            step,
            path: path.clone(),
            bytes,
            seconds,
        });
        Ok(path)
    }
}

/// A PIDNet run as the shared schedule sees it.
struct PidNetRun<'a, B: AutodiffBackend> {
    trainer: &'a mut Trainer<B>,
    observer: &'a mut dyn Observer,
    total: u64,
    stop_at: u64,
    timer: StepTimer,
}

impl<B: AutodiffBackend> Schedulable for PidNetRun<'_, B> {
    type Error = TrainError;
    type Batches = EpochIter;
    type Report = StepReport;
    type Validation = MetricReport;

    fn state(&self) -> &TrainState {
        &self.trainer.state
    }

    fn state_mut(&mut self) -> &mut TrainState {
        &mut self.trainer.state
    }

    fn open_epoch(&mut self) -> EpochIter {
        let state = &self.trainer.state;
        self.trainer
            .train_loader
            .epoch_iter(state.epoch, state.batch_in_epoch)
    }

    fn step(&mut self, batches: &mut EpochIter) -> Result<StepReport, TrainError> {
        self.trainer
            .train_step(batches, self.total, &mut self.timer, self.stop_at)
    }

    fn report(&mut self, report: StepReport, log: bool) -> Result<(), TrainError> {
        if log {
            self.trainer.log_step(&report)?;
        }
        self.observer.event(&TrainEvent::Step(report));
        Ok(())
    }

    fn validate(&mut self) -> Result<MetricReport, TrainError> {
        self.trainer.validate_and_record(self.observer)
    }

    fn save(&mut self) -> Result<(), TrainError> {
        self.trainer.save(self.observer).map(drop)
    }

    fn finish_steps(&mut self) -> Result<(), TrainError> {
        self.trainer.refresh_model_from_replicas()
    }
}

/// Burn initialises parameters lazily, on first use, so their values would depend on the order
/// of first use (forward order vs. export order). Drawing them all now, in module order, makes
/// a seeded run's initial weights the same whatever happens next.
pub(crate) fn initialize_now<B: burn::tensor::backend::Backend, M: burn::module::Module<B>>(
    module: &M,
) {
    struct Touch;
    impl<B: burn::tensor::backend::Backend> burn::module::ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(
            &mut self,
            param: &burn::module::Param<burn::tensor::Tensor<B, D>>,
        ) {
            let _ = param.val();
        }
    }
    module.visit(&mut Touch);
}

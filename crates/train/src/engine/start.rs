//! Starting a run: the checks that need no model, the seeded initial model (the same on every
//! device), the optimizer and the run directory.

use burn::tensor::backend::AutodiffBackend;

use super::initial_weights::{seeded_initial_model, Host};
use super::{log_error, Engine, Model, RunLog, Task, TrainConfig, TrainError};
use crate::checkpoint::{CheckpointDir, RunDirLock, TrainState};
use crate::mixed_precision::LossScaler;
use crate::stop_signal::StopSignal;

impl<B: AutodiffBackend, T: Task<B>> Engine<B, T> {
    /// A run of `task` over `devices` (one replica and one worker thread each when there are
    /// several; see `replicas.rs`), with a freshly initialised model (seeded) and optimizer.
    pub fn start(
        task: T,
        train: TrainConfig<<T as Task<B>>::Recipe>,
        experiment_text: String,
        devices: Vec<B::Device>,
    ) -> Result<Self, TrainError>
    where
        T: Task<Host>,
    {
        let device = Self::check_start(&task, &train, &devices)?;
        // The same initial weights for a seed, every time and on every device.
        let model = seeded_initial_model::<B, T>(&task, &device, train.seed)?;
        Self::with_model(task, model, train, experiment_text, (device, devices))
    }

    /// The first device, once the configuration is known to be trainable on `devices`.
    fn check_start(
        task: &T,
        train: &TrainConfig<T::Recipe>,
        devices: &[B::Device],
    ) -> Result<B::Device, TrainError> {
        let Some(device) = devices.first().cloned() else {
            return Err(TrainError::Config("no device to train on".into()));
        };
        train.check()?;
        (train.precision.check_supported::<B>(devices)).map_err(TrainError::Config)?;
        let per_step = train.grad_accum * devices.len();
        if task.batches_per_epoch() < per_step {
            let (batch_size_field, batch_size) = task.batch_size_field();
            return Err(TrainError::TooFewBatches {
                batches: task.batches_per_epoch(),
                batch_size,
                batch_size_field,
                per_step,
            });
        }
        Ok(device)
    }

    /// The engine around `model`, on `device` (the first of `devices`).
    fn with_model(
        task: T,
        model: Model<B, T>,
        train: TrainConfig<T::Recipe>,
        experiment_text: String,
        (device, devices): (B::Device, Vec<B::Device>),
    ) -> Result<Self, TrainError> {
        let params = task.trained_params(&model);
        let optimizer = task.optimizer(&params)?;
        let state = TrainState {
            step: 0,
            epoch: 0,
            batch_in_epoch: 0,
            seed: train.seed,
            loss_scaler: LossScaler::new(
                train.loss_scaler.clone(),
                train.precision.uses_loss_scaling(),
            ),
            best_metric: None,
            history: Vec::new(),
            micro_batches_per_step: Some(train.grad_accum * devices.len()),
        };
        let run_dir = train.run_dir.clone();
        let lock = RunDirLock::acquire(&run_dir)?;
        let log = RunLog::open(&run_dir).map_err(log_error(&run_dir))?;
        Ok(Self {
            step_fn: task.step(),
            task,
            model: Some(model),
            optimizer,
            params,
            checkpoints: CheckpointDir::of_run(&run_dir),
            train,
            experiment_text,
            state,
            device,
            devices,
            replicate_single_device: false,
            replicas: None,
            log,
            last_checkpoint: None,
            stop: StopSignal::new(),
            _lock: lock,
        })
    }
}

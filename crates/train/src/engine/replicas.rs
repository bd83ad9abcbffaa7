//! Data-parallel training on several devices with Burn's collective all-reduce (no NCCL, no
//! `torch.distributed`): one worker thread per device, each with its own replica of the model
//! and optimizer. Every step, each replica computes the gradients of its own micro-batches, the
//! gradients are averaged across replicas, and every replica takes the identical optimizer
//! step. BatchNorm statistics stay per device (as in the official DataParallel recipe);
//! checkpoints and validation use replica 0. Any task's model trains this way.
//!
//! This file is the pool (starting the replicas, handing out a step, reading replica 0);
//! `replica_worker.rs` is what each replica's thread does.

use std::path::Path;
use std::sync::mpsc::{channel, Sender};
use std::thread::JoinHandle;

use burn::collective::{reset_collective, CollectiveConfig, PeerId};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;
use segburn_models::tensor_file::NamedTensors;

use super::error::TrainError;
use super::initial_weights::random_stream;
use super::replica_worker::{Command, Replica};
pub(crate) use super::replica_worker::{ReplicaStep, Share, StepSettings};
use super::task::{Model, Task, TaskStep};

struct Worker<B: AutodiffBackend, S: TaskStep<B>> {
    commands: Sender<Command<B, S>>,
    thread: Option<JoinHandle<()>>,
}

/// The replicas of a data-parallel run.
pub(crate) struct ReplicaPool<B: AutodiffBackend, S: TaskStep<B>> {
    workers: Vec<Worker<B, S>>,
}

/// Burn's collective server is one per process (and backend), so at most one pool may live at
/// a time; a second would reset the first one's collective in the middle of its steps.
static POOL_ALIVE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The crate's tests that start replica pools take turns (they share one process).
#[cfg(test)]
pub(crate) fn one_pool_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parameter ids in visit order (identical module structure ⇒ identical order).
struct CollectIds(Vec<ParamId>);

impl<B: Backend> ModuleVisitor<B> for CollectIds {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0.push(param.id);
    }
}

/// Gives a replica's parameters the ids of the original's: the all-reduce matches gradients
/// by parameter id.
struct AssignIds(std::vec::IntoIter<ParamId>);

impl<B: Backend> ModuleMapper<B> for AssignIds {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let id = self.0.next().unwrap_or(param.id);
        let value = param.val();
        param.transform_for_load(value, id)
    }
}

/// Everything a replica is built from: the run's current model and optimizer state.
pub(crate) struct ReplicaSource<'a, B: AutodiffBackend, T: Task<B>> {
    pub task: &'a T,
    pub model: &'a Model<B, T>,
    pub optimizer_state: &'a NamedTensors,
}

impl<B: AutodiffBackend, S: TaskStep<B>> ReplicaPool<B, S> {
    /// One replica per device, each an independent copy (own BatchNorm statistics) of `source`
    /// with the same parameter ids and optimizer state.
    pub fn spawn<T: Task<B, Step = S>>(
        source: ReplicaSource<'_, B, T>,
        devices: &[B::Device],
    ) -> Result<Self, TrainError> {
        use std::sync::atomic::Ordering;
        if POOL_ALIVE.swap(true, Ordering::SeqCst) {
            return Err(TrainError::Config(
                "another data-parallel run is active in this process; Burn's collective \
                 operations are process-wide, so train one data-parallel run per process"
                    .into(),
            ));
        }
        // From here on the pool exists (possibly with no worker), and its Drop clears the flag.
        let mut pool = Self {
            workers: Vec::with_capacity(devices.len()),
        };
        reset_collective::<B::InnerBackend>();
        let task = source.task;
        let state = task.export_model(source.model);
        let mut ids = CollectIds(Vec::new());
        source.model.visit(&mut ids);
        let config = CollectiveConfig::default().with_num_devices(devices.len());
        for (index, device) in devices.iter().enumerate() {
            // Overwritten below, but drawn from the process's random stream.
            let fresh = {
                let _turn = random_stream();
                task.init_model(device)
            };
            let model = task.load_exact(fresh, &state, Path::new("replica"))?;
            let model = model.map(&mut AssignIds(ids.0.clone().into_iter()));
            let params = task.trained_params(&model);
            let optimizer = task
                .optimizer(&params)?
                .import(source.optimizer_state, device);
            let (commands, receiver) = channel();
            let replica = Replica {
                peer: PeerId::from(index),
                device: device.clone(),
                model: Some(model),
                optimizer,
                params,
                step: task.step(),
            };
            let config = config.clone();
            let thread = std::thread::Builder::new()
                .name(format!("segburn-replica-{index}"))
                .spawn(move || replica.serve(receiver, config))
                .map_err(|e| TrainError::Config(format!("cannot start a replica thread: {e}")))?;
            pool.workers.push(Worker {
                commands,
                thread: Some(thread),
            });
        }
        Ok(pool)
    }

    /// One step: replica `r` gets `shares[r]`.
    pub fn step(
        &self,
        shares: Vec<Share<S::Batch>>,
        settings: StepSettings,
    ) -> Result<Vec<ReplicaStep<S::Terms>>, TrainError> {
        let mut replies = Vec::with_capacity(self.workers.len());
        for (worker, share) in self.workers.iter().zip(shares) {
            let (reply, answer) = channel();
            worker
                .commands
                .send(Command::Step(share, settings, reply))
                .map_err(|_| stopped())?;
            replies.push(answer);
        }
        // Collect every answer before returning an error, so no replica is left mid-step.
        let answers: Vec<Result<ReplicaStep<S::Terms>, TrainError>> = replies
            .into_iter()
            .map(|a| a.recv().unwrap_or_else(|_| Err(stopped())))
            .collect();
        answers.into_iter().collect()
    }

    /// A copy of replica 0's model (parameters and BatchNorm statistics).
    pub fn model(&self) -> Result<S::Model, TrainError> {
        let (reply, answer) = channel();
        self.workers[0]
            .commands
            .send(Command::Model(reply))
            .map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())
    }

    /// Replica 0's optimizer state.
    pub fn optimizer_state(&self) -> Result<NamedTensors, TrainError> {
        let (reply, answer) = channel();
        self.workers[0]
            .commands
            .send(Command::OptimizerState(reply))
            .map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())
    }
}

impl<B: AutodiffBackend, S: TaskStep<B>> Drop for ReplicaPool<B, S> {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            // Closing the channel ends the worker's loop.
            let (closed, _) = channel();
            worker.commands = closed;
            if let Some(thread) = worker.thread.take() {
                let _ = thread.join();
            }
        }
        POOL_ALIVE.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

fn stopped() -> TrainError {
    TrainError::Config("a data-parallel replica thread stopped unexpectedly".into())
}

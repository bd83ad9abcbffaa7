//! Data-parallel training on several devices with Burn's collective all-reduce (no NCCL, no
//! `torch.distributed`): one worker thread per device, each with its own replica of the model
//! and optimizer. Every step, each replica computes the gradients of its own micro-batches, the
//! gradients are averaged across replicas, and every replica takes the identical optimizer
//! step. BatchNorm statistics stay per device (as in the official DataParallel recipe);
//! checkpoints and validation use replica 0. Any task's model trains this way.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use burn::collective::{
    finish_collective, register, reset_collective, CollectiveConfig, PeerId, ReduceOperation,
};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;
use segburn_data::panic_message;
use segburn_models::tensor_file::NamedTensors;

use super::accumulate::accumulate_gradients;
use super::error::TrainError;
use super::task::{LossTerms, MicroBatch, Model, Task, TaskStep};
use crate::optim::{unscale_and_clip, GradientSummary, OptimizerSet, ParamInfo};

/// The settings of one step, the same for every replica.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepSettings {
    pub lr: f64,
    pub scale: f64,
    pub clip: Option<f64>,
    pub dtype: burn::tensor::FloatDType,
    pub seed: u64,
    /// The step being taken (0-based).
    pub step: u64,
}

impl StepSettings {
    /// Where micro-batch `index` of this step sits.
    pub fn micro_batch(&self, index: usize) -> MicroBatch {
        MicroBatch {
            seed: self.seed,
            step: self.step,
            index,
            dtype: self.dtype,
        }
    }
}

/// What one replica computed in a step.
pub(crate) struct ReplicaStep<L> {
    /// Loss terms, averaged over its micro-batches.
    pub terms: L,
    pub summary: GradientSummary,
    pub images: usize,
}

/// A replica's share of a step: its micro-batches and the index of the first one in the step.
pub(crate) struct Share<T> {
    pub batches: Vec<T>,
    pub first_index: usize,
}

type Reply<L> = Sender<Result<ReplicaStep<L>, TrainError>>;

enum Command<B: AutodiffBackend, S: TaskStep<B>> {
    Step(Share<S::Batch>, StepSettings, Reply<S::Terms>),
    Model(Sender<S::Model>),
    OptimizerState(Sender<NamedTensors>),
}

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
                let _turn = super::random_stream();
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

struct Replica<B: AutodiffBackend, S: TaskStep<B>> {
    peer: PeerId,
    device: B::Device,
    model: Option<S::Model>,
    optimizer: OptimizerSet<S::Model, B>,
    params: Vec<ParamInfo>,
    step: S,
}

impl<B: AutodiffBackend, S: TaskStep<B>> Replica<B, S> {
    fn serve(mut self, commands: Receiver<Command<B, S>>, config: CollectiveConfig) {
        if register::<B::InnerBackend>(self.peer, self.device.clone(), config).is_err() {
            return;
        }
        while let Ok(command) = commands.recv() {
            match command {
                Command::Step(share, settings, reply) => {
                    let _ = reply.send(self.take_step(share, settings));
                }
                Command::Model(reply) => {
                    let _ = reply.send(self.model.clone().expect("model present between steps"));
                }
                Command::OptimizerState(reply) => {
                    let _ = reply.send(self.optimizer.export(&self.device));
                }
            }
        }
        let _ = finish_collective::<B::InnerBackend>(self.peer);
    }

    fn take_step(
        &mut self,
        share: Share<S::Batch>,
        settings: StepSettings,
    ) -> Result<ReplicaStep<S::Terms>, TrainError> {
        let model = self.model.take().expect("model present between steps");
        let Share {
            batches,
            first_index,
        } = share;
        let micro = batches.len();
        let mut terms = S::Terms::default();
        let mut images = 0;
        let device = self.device.clone();
        let step = &self.step;
        let mut batches = batches.into_iter();
        // A panic here (a malformed batch, a device out of memory inside Burn) must not kill
        // the thread before the all-reduce below, or every other replica would wait forever.
        let computed = catch_unwind(AssertUnwindSafe(|| {
            accumulate_gradients(&model, micro, settings.scale, |model, k| {
                let batch = batches.next().ok_or_else(|| {
                    TrainError::Config(
                        "a replica received fewer micro-batches than the step needs".into(),
                    )
                })?;
                images += S::images(&batch);
                let at = settings.micro_batch(first_index + k);
                let loss = step.loss(model, batch, &at, &device)?;
                terms.add_share(&loss.terms, micro);
                Ok::<_, TrainError>(loss.objective)
            })
        }))
        .unwrap_or_else(|panic| {
            Err(TrainError::Config(format!(
                "data-parallel replica {} panicked during its step: {}",
                self.peer.0,
                panic_message(panic.as_ref())
            )))
        });
        // Every replica must join every all-reduce with the same parameters, or the others
        // wait forever: each sends exactly the trained parameters' gradients, zeros where its
        // micro-batches gave none (or where it failed; it reports its error afterwards).
        let (grads, failure) = match computed {
            Ok(grads) => (grads, None),
            Err(e) => (None, Some(e)),
        };
        let grads = trained_gradients(grads, &model, &self.params);
        let reduced = grads.all_reduce::<B::InnerBackend>(self.peer, ReduceOperation::Mean);
        let mut grads = match reduced {
            Ok(grads) => grads,
            Err(e) => {
                self.model = Some(model);
                return Err(TrainError::Config(format!("all-reduce failed: {e:?}")));
            }
        };
        if let Some(e) = failure {
            self.model = Some(model);
            return Err(e);
        }
        let summary = unscale_and_clip::<B::InnerBackend>(
            &mut grads,
            &self.params,
            settings.scale,
            settings.clip,
            &device,
        );
        // The gradients are identical on every replica after the all-reduce, so every replica
        // reaches the same verdict as the loss scaler on the main thread.
        self.model = Some(if summary.finite {
            self.optimizer.step(settings.lr, model, grads)
        } else {
            model
        });
        Ok(ReplicaStep {
            terms,
            summary,
            images,
        })
    }
}

/// Exactly the gradients of `params`: those in `grads`, zeros for the others.
fn trained_gradients<B: AutodiffBackend, M: Module<B>>(
    grads: Option<GradientsParams>,
    model: &M,
    params: &[ParamInfo],
) -> GradientsParams {
    struct Pick<'a> {
        from: Option<GradientsParams>,
        into: GradientsParams,
        wanted: &'a [ParamInfo],
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Pick<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if !self.wanted.iter().any(|p| p.id == param.id) {
                return;
            }
            let grad = self
                .from
                .as_mut()
                .and_then(|g| g.remove::<B::InnerBackend, D>(param.id))
                .unwrap_or_else(|| {
                    let value = param.val();
                    Tensor::<B::InnerBackend, D>::zeros(value.shape(), &value.device())
                });
            self.into.register::<B::InnerBackend, D>(param.id, grad);
        }
    }
    let mut pick = Pick {
        from: grads,
        into: GradientsParams::new(),
        wanted: params,
    };
    model.visit(&mut pick);
    pick.into
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use burn::backend::{Autodiff, Flex};
    use segburn_data::{Batch, DataConfig, Layout};
    use segburn_models::pidnet::{PidNetConfig, PidNetSize};

    use super::*;
    use crate::loss::PidNetLossConfig;
    use crate::pidnet::{PidNetSetup, PidNetTask, PidNetTrainConfig};

    type AD = Autodiff<Flex>;

    fn batch(index: usize, images: usize) -> Batch {
        let (h, w) = (64, 64);
        Batch {
            epoch: 0,
            index,
            batch_size: 1,
            height: h,
            width: w,
            images: vec![0.5; images],
            labels: vec![1; h * w],
            edges: vec![0; h * w],
            names: vec![format!("sample {index}")],
            sample_indices: vec![index],
        }
    }

    /// A replica whose step panics reports it as an error, and its peers are not left waiting
    /// in the all-reduce.
    #[test]
    fn a_panicking_replica_fails_the_step_instead_of_hanging_its_peers() {
        let _turn = one_pool_at_a_time();
        let device = Default::default();
        let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
        let setup = PidNetSetup {
            model: PidNetConfig::new(PidNetSize::S, 19),
            data: DataConfig {
                layout: Layout::Cityscapes { root: sample },
                ..DataConfig::default()
            },
            loss: PidNetLossConfig::default(),
            train: PidNetTrainConfig {
                validate_at_end: false,
                validate_every_epochs: 0,
                ..PidNetTrainConfig::default()
            },
            experiment_text: String::new(),
        };
        let task = PidNetTask::new(&setup).expect("the sample dataset");
        let model = Task::<AD>::init_model(&task, &device);
        let params = Task::<AD>::trained_params(&task, &model);
        let state = Task::<AD>::optimizer(&task, &params)
            .expect("optimizer")
            .export(&device);
        let source = ReplicaSource {
            task: &task,
            model: &model,
            optimizer_state: &state,
        };
        let pool = ReplicaPool::<AD, _>::spawn(source, &[device, device]).unwrap();
        let settings = StepSettings {
            lr: 0.01,
            scale: 1.0,
            clip: None,
            dtype: burn::tensor::FloatDType::F32,
            seed: 0,
            step: 0,
        };
        // Replica 1's image buffer is too short for its shape: building the tensor panics.
        let shares = vec![
            Share {
                batches: vec![batch(0, 3 * 64 * 64)],
                first_index: 0,
            },
            Share {
                batches: vec![batch(1, 10)],
                first_index: 1,
            },
        ];
        let (done, outcome) = channel();
        std::thread::spawn(move || {
            let _ = done.send(pool.step(shares, settings).err().map(|e| e.to_string()));
        });
        let error = outcome
            .recv_timeout(Duration::from_secs(300))
            .expect("the step returned instead of hanging")
            .expect("the step failed");
        assert!(
            error.contains("replica 1 panicked during its step"),
            "{error}"
        );
    }
}

//! Data-parallel training on several devices with Burn's collective all-reduce (no NCCL, no
//! `torch.distributed`): one worker thread per device, each with its own replica of the model
//! and optimizer. Every step, each replica computes the gradients of its own micro-batches, the
//! gradients are averaged across replicas, and every replica takes the identical optimizer
//! step. BatchNorm statistics stay per device (as in the official DataParallel recipe);
//! checkpoints and validation use replica 0.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use burn::collective::{
    finish_collective, register, reset_collective, CollectiveConfig, PeerId, ReduceOperation,
};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;
use segburn_data::{panic_message, Batch};
use segburn_models::pidnet::{load_pidnet_tensors, official_key, LoadMode, PidNet, PidNetConfig};
use segburn_models::tensor_file::NamedTensors;

use super::accumulate::accumulate_gradients;
use super::error::TrainError;
use super::micro_batch::{micro_batch_loss, StepSettings};
use crate::loss::{PidNetLoss, PidNetLossValues};
use crate::optim::{
    list_params, unscale_and_clip, GradientSummary, OptimizerConfig, OptimizerSet,
    ParamGroupConfig, ParamInfo,
};

/// What one replica computed in a step.
pub(crate) struct ReplicaStep {
    /// Loss terms, averaged over its micro-batches.
    pub values: PidNetLossValues,
    pub summary: GradientSummary,
    pub images: usize,
}

enum Command<B: AutodiffBackend> {
    Step(
        Vec<Batch>,
        StepSettings,
        Sender<Result<ReplicaStep, TrainError>>,
    ),
    Model(Sender<PidNet<B>>),
    OptimizerState(Sender<NamedTensors>),
}

struct Worker<B: AutodiffBackend> {
    commands: Sender<Command<B>>,
    thread: Option<JoinHandle<()>>,
}

/// The replicas of a data-parallel run.
pub(crate) struct ReplicaPool<B: AutodiffBackend> {
    workers: Vec<Worker<B>>,
}

/// Burn's collective server is one per process (and backend), so at most one pool may live at
/// a time; a second would reset the first one's collective in the middle of its steps.
static POOL_ALIVE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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

/// Everything a replica is built from.
pub(crate) struct ReplicaSource<'a, B: AutodiffBackend> {
    pub model: &'a PidNet<B>,
    pub model_config: &'a PidNetConfig,
    pub optimizer_state: &'a NamedTensors,
    pub optimizer: &'a OptimizerConfig,
    pub groups: &'a [ParamGroupConfig],
    pub loss: &'a PidNetLoss,
}

impl<B: AutodiffBackend> ReplicaPool<B> {
    /// One replica per device, each an independent copy (own BatchNorm statistics) of `source`
    /// with the same parameter ids and optimizer state.
    pub fn spawn(source: ReplicaSource<'_, B>, devices: &[B::Device]) -> Result<Self, TrainError> {
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
        let state = segburn_models::pidnet::pidnet_state_dict(source.model);
        let mut ids = CollectIds(Vec::new());
        source.model.visit(&mut ids);
        let config = CollectiveConfig::default().with_num_devices(devices.len());
        for (index, device) in devices.iter().enumerate() {
            let fresh = source.model_config.init::<B>(device);
            let (model, _) = load_pidnet_tensors(
                fresh,
                &state,
                std::path::Path::new("replica"),
                LoadMode::Strict,
            )?;
            let model = model.map(&mut AssignIds(ids.0.clone().into_iter()));
            let params = list_params(&model, &official_key);
            let optimizer = OptimizerSet::new(source.optimizer, source.groups, &params)
                .import(source.optimizer_state, device);
            let (commands, receiver) = channel();
            let replica = Replica {
                peer: PeerId::from(index),
                device: device.clone(),
                model: Some(model),
                optimizer,
                params,
                loss: source.loss.clone(),
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

    /// One step: replica `r` gets `per_replica[r]` micro-batches.
    pub fn step(
        &self,
        per_replica: Vec<Vec<Batch>>,
        settings: StepSettings,
    ) -> Result<Vec<ReplicaStep>, TrainError> {
        let mut replies = Vec::with_capacity(self.workers.len());
        for (worker, batches) in self.workers.iter().zip(per_replica) {
            let (reply, answer) = channel();
            worker
                .commands
                .send(Command::Step(batches, settings, reply))
                .map_err(|_| stopped())?;
            replies.push(answer);
        }
        // Collect every answer before returning an error, so no replica is left mid-step.
        let answers: Vec<Result<ReplicaStep, TrainError>> = replies
            .into_iter()
            .map(|a| a.recv().unwrap_or_else(|_| Err(stopped())))
            .collect();
        answers.into_iter().collect()
    }

    /// A copy of replica 0's model (parameters and BatchNorm statistics).
    pub fn model(&self) -> Result<PidNet<B>, TrainError> {
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

impl<B: AutodiffBackend> Drop for ReplicaPool<B> {
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

struct Replica<B: AutodiffBackend> {
    peer: PeerId,
    device: B::Device,
    model: Option<PidNet<B>>,
    optimizer: OptimizerSet<PidNet<B>, B>,
    params: Vec<ParamInfo>,
    loss: PidNetLoss,
}

impl<B: AutodiffBackend> Replica<B> {
    fn serve(mut self, commands: Receiver<Command<B>>, config: CollectiveConfig) {
        if register::<B::InnerBackend>(self.peer, self.device.clone(), config).is_err() {
            return;
        }
        while let Ok(command) = commands.recv() {
            match command {
                Command::Step(batches, settings, reply) => {
                    let _ = reply.send(self.step(batches, settings));
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

    fn step(
        &mut self,
        batches: Vec<Batch>,
        settings: StepSettings,
    ) -> Result<ReplicaStep, TrainError> {
        let model = self.model.take().expect("model present between steps");
        let micro = batches.len();
        let mut values = PidNetLossValues::default();
        let mut images = 0;
        let device = self.device.clone();
        let loss = &self.loss;
        let mut batches = batches.into_iter();
        // A panic here (a malformed batch, a device out of memory inside Burn) must not kill
        // the thread before the all-reduce below, or every other replica would wait forever.
        let computed = catch_unwind(AssertUnwindSafe(|| {
            accumulate_gradients(&model, micro, settings.scale, |model, _| {
                let batch = batches.next().ok_or_else(|| {
                    TrainError::Config(
                        "a replica received fewer micro-batches than the step needs".into(),
                    )
                })?;
                images += batch.batch_size;
                let (total, terms) = micro_batch_loss(model, loss, batch, &settings, &device)?;
                values.add_share(&terms, micro);
                Ok::<_, TrainError>(total)
            })
        }))
        .unwrap_or_else(|panic| {
            Err(TrainError::Config(format!(
                "data-parallel replica {} panicked during its step: {}",
                self.peer.0,
                panic_message(panic.as_ref())
            )))
        });
        // Every replica must join every all-reduce, or the others wait forever: a replica that
        // failed contributes zeros and reports its error afterwards.
        let (grads, failure) = match computed {
            Ok(grads) => (grads, None),
            Err(e) => (self.zero_gradients(&model), Some(e)),
        };
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
            values,
            summary,
            images,
        })
    }

    fn zero_gradients(&self, model: &PidNet<B>) -> GradientsParams {
        struct Zeros<'a> {
            grads: GradientsParams,
            wanted: &'a [ParamInfo],
        }
        impl<B: AutodiffBackend> ModuleVisitor<B> for Zeros<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                if self.wanted.iter().any(|p| p.id == param.id) {
                    let value = param.val();
                    let zeros = Tensor::<B::InnerBackend, D>::zeros(value.shape(), &value.device());
                    self.grads.register::<B::InnerBackend, D>(param.id, zeros);
                }
            }
        }
        let mut zeros = Zeros {
            grads: GradientsParams::new(),
            wanted: &self.params,
        };
        model.visit(&mut zeros);
        zeros.grads
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use burn::backend::{Autodiff, Flex};
    use segburn_models::pidnet::PidNetSize;

    use super::*;
    use crate::loss::PidNetLossConfig;

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
        let device = Default::default();
        let config = PidNetConfig::new(PidNetSize::S, 19);
        let model = config.init::<AD>(&device);
        let optimizer = OptimizerConfig::default();
        let params = list_params(&model, &official_key);
        let state = OptimizerSet::<PidNet<AD>, AD>::new(&optimizer, &[], &params).export(&device);
        let loss = PidNetLoss::new(PidNetLossConfig::default()).unwrap();
        let source = ReplicaSource {
            model: &model,
            model_config: &config,
            optimizer_state: &state,
            optimizer: &optimizer,
            groups: &[],
            loss: &loss,
        };
        let pool = ReplicaPool::spawn(source, &[device, device]).unwrap();
        let settings = StepSettings {
            lr: 0.01,
            scale: 1.0,
            clip: None,
            dtype: burn::tensor::FloatDType::F32,
            num_classes: 19,
            ignore_index: 255,
        };
        // Replica 1's image buffer is too short for its shape: building the tensor panics.
        let batches = vec![vec![batch(0, 3 * 64 * 64)], vec![batch(1, 10)]];
        let (done, outcome) = channel();
        std::thread::spawn(move || {
            let _ = done.send(pool.step(batches, settings).err().map(|e| e.to_string()));
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

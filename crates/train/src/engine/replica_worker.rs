//! One data-parallel replica: a worker thread that owns its copy of the model and optimizer and
//! serves the pool's commands. Each step it computes the gradients of its micro-batches, joins
//! the all-reduce with exactly the trained parameters' gradients (even when its own
//! computation failed, so that no peer waits forever), and takes the optimizer step.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, Sender};

use burn::collective::{finish_collective, register, CollectiveConfig, PeerId, ReduceOperation};
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use segburn_data::panic_message;
use segburn_models::tensor_file::NamedTensors;

use super::accumulate::accumulate_gradients;
use super::error::TrainError;
use super::task::{LossTerms, MicroBatch, TaskStep};
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

pub(super) type Reply<L> = Sender<Result<ReplicaStep<L>, TrainError>>;

pub(super) enum Command<B: AutodiffBackend, S: TaskStep<B>> {
    Step(Share<S::Batch>, StepSettings, Reply<S::Terms>),
    Model(Sender<S::Model>),
    OptimizerState(Sender<NamedTensors>),
}

/// A replica as its thread owns it.
pub(super) struct Replica<B: AutodiffBackend, S: TaskStep<B>> {
    pub peer: PeerId,
    pub device: B::Device,
    pub model: Option<S::Model>,
    pub optimizer: OptimizerSet<S::Model, B>,
    pub params: Vec<ParamInfo>,
    pub step: S,
}

impl<B: AutodiffBackend, S: TaskStep<B>> Replica<B, S> {
    /// Serves `commands` until the pool closes the channel.
    pub fn serve(mut self, commands: Receiver<Command<B, S>>, config: CollectiveConfig) {
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

//! One optimizer step: on the calling thread (`grad_accum` micro-batches accumulated), or
//! through the data-parallel replicas (`grad_accum` per device, replica `r` taking the `r`-th
//! group in loader order, so the step sees the same micro-batches as one device accumulating
//! `grad_accum × devices`).

use std::time::Instant;

use super::replicas::{Share, StepSettings};
use super::run_loop::StepTimer;
use super::task::{Batch, LossTerms, Task, TaskStep, Terms};
use super::{Engine, StepReport, TrainError};
use crate::compute_threads::on_compute_pool;
use crate::mixed_precision::StepVerdict;
use crate::optim::{unscale_and_clip, GradientSummary};
use burn::tensor::backend::AutodiffBackend;

/// What a step computed before the loss scaler's verdict.
struct Computed<L> {
    terms: L,
    /// `None` when no micro-batch gave a gradient (nothing to learn from).
    summary: Option<GradientSummary>,
    images: usize,
}

impl<B: AutodiffBackend, T: Task<B>> Engine<B, T> {
    /// The settings of the next step: learning rate, loss scale, clipping, precision.
    fn step_settings(&self, total: u64) -> StepSettings {
        let train = &self.train;
        StepSettings {
            lr: train.schedule.lr(train.lr, self.state.step, total),
            scale: self.state.loss_scaler.loss_factor(),
            clip: train.grad_clip_norm,
            dtype: train.precision.compute_dtype(),
            seed: train.seed,
            step: self.state.step,
        }
    }

    fn non_finite(&self, terms: &Terms<B, T>, what: &str) -> TrainError {
        non_finite(self.state.step, terms, what, &self.last_checkpoint)
    }

    /// The next `count` micro-batches of the epoch.
    fn next_batches(
        &mut self,
        batches: &mut T::Epoch,
        count: usize,
    ) -> Result<Vec<Batch<B, T>>, TrainError> {
        let mut taken = Vec::with_capacity(count);
        for _ in 0..count {
            taken.push(batches.next().ok_or_else(|| {
                TrainError::Resume("the data loader ended before the epoch's last step".into())
            })??);
        }
        self.state.batch_in_epoch += count;
        Ok(taken)
    }

    /// One optimizer step over the step's micro-batches.
    pub(super) fn train_step(
        &mut self,
        batches: &mut T::Epoch,
        total: u64,
        timer: &StepTimer,
        stop_at: u64,
    ) -> Result<StepReport<Terms<B, T>>, TrainError> {
        let started = Instant::now();
        let settings = self.step_settings(total);
        let micro = self.next_batches(batches, self.micro_batches_per_step())?;
        // A step whose micro-batches all have nothing to learn from changes nothing (no
        // optimizer step, no loss-scaler update), on any number of devices.
        let computed = if micro.iter().all(T::is_empty) {
            let images = micro.iter().map(<T::Step as TaskStep<B>>::images).sum();
            Computed {
                terms: Terms::<B, T>::default(),
                summary: None,
                images,
            }
        } else if self.replicas.is_some() {
            self.compute_parallel(micro, settings)?
        } else {
            // On a pool thread: the step's ops then hand work to the pool without waiting
            // for a sleeping thread to wake (see `on_compute_pool`).
            on_compute_pool(|| self.compute_here(micro, settings))?
        };
        let Computed {
            terms,
            summary,
            images,
        } = computed;
        let finite = summary.is_none_or(|s| s.finite);
        let healthy = finite && terms.total().is_finite();
        if !healthy && !self.state.loss_scaler.enabled {
            let what = if terms.total().is_finite() {
                "gradients"
            } else {
                "loss"
            };
            return Err(self.non_finite(&terms, what));
        }
        // A step without gradients leaves the loss scaler as it was.
        let verdict = match summary {
            Some(summary) => self.state.loss_scaler.update(summary.finite),
            None => StepVerdict::Apply,
        };
        self.state.step += 1;
        let seconds = started.elapsed().as_secs_f64();
        Ok(StepReport {
            step: self.state.step,
            total_steps: total,
            epoch: self.state.epoch,
            lr: settings.lr,
            loss: terms,
            grad_norm: summary.map_or(0.0, |s| s.norm),
            loss_scale: settings.scale,
            skipped: verdict == StepVerdict::SkipOverflow,
            images,
            seconds,
            images_per_second: images as f64 / seconds.max(1e-9),
            eta_seconds: timer.eta(self.state.step, stop_at),
        })
    }

    /// The step on this thread: accumulate, unscale and clip, and (unless the gradients
    /// overflowed) the optimizer step.
    fn compute_here(
        &mut self,
        micro: Vec<Batch<B, T>>,
        settings: StepSettings,
    ) -> Result<Computed<Terms<B, T>>, TrainError> {
        let count = micro.len();
        let mut terms = Terms::<B, T>::default();
        let mut images = 0usize;
        let model = self.model.take().expect("model present during a step");
        let step_fn = &self.step_fn;
        let device = &self.device;
        let scaler_enabled = self.state.loss_scaler.enabled;
        let (step, last_checkpoint) = (self.state.step, &self.last_checkpoint);
        let mut micro = micro.into_iter();
        let accumulated = super::accumulate_gradients(&model, count, settings.scale, |model, k| {
            let batch = micro.next().expect("one batch per micro-batch");
            images += <T::Step as TaskStep<B>>::images(&batch);
            let loss = step_fn.loss(model, batch, &settings.micro_batch(k), device)?;
            terms.add_share(&loss.terms, count);
            if !loss.terms.total().is_finite() && !scaler_enabled {
                return Err(non_finite(step, &loss.terms, "loss", last_checkpoint));
            }
            Ok(loss.objective)
        });
        let grads = match accumulated {
            Ok(grads) => grads,
            Err(e) => {
                self.model = Some(model);
                return Err(e);
            }
        };
        let Some(mut grads) = grads else {
            self.model = Some(model);
            return Ok(Computed {
                terms,
                summary: None,
                images,
            });
        };
        let summary = unscale_and_clip::<B::InnerBackend>(
            &mut grads,
            &self.params,
            settings.scale,
            settings.clip,
            &self.device,
        );
        self.model = Some(if summary.finite {
            self.optimizer.step(settings.lr, model, grads)
        } else {
            model
        });
        Ok(Computed {
            terms,
            summary: Some(summary),
            images,
        })
    }

    /// The step on the replicas: `grad_accum` micro-batches each, in loader order.
    fn compute_parallel(
        &mut self,
        micro: Vec<Batch<B, T>>,
        settings: StepSettings,
    ) -> Result<Computed<Terms<B, T>>, TrainError> {
        let accumulate = self.train.grad_accum;
        let mut micro = micro.into_iter();
        let shares = (0..self.devices.len())
            .map(|replica| Share {
                batches: micro.by_ref().take(accumulate).collect(),
                first_index: replica * accumulate,
            })
            .collect();
        let pool = self.replicas.as_ref().expect("checked by the caller");
        // The replicas compute in the process's turn on the compute pool, as a single-device
        // step does (`compute_turn`).
        let results = {
            let _turn = crate::compute_threads::compute_turn();
            pool.step(shares, settings)?
        };
        let mut terms = Terms::<B, T>::default();
        for result in &results {
            terms.add_share(&result.terms, results.len());
        }
        Ok(Computed {
            terms,
            summary: Some(results[0].summary),
            images: results.iter().map(|r| r.images).sum(),
        })
    }
}

/// The error that ends a run (without the f16 loss scaler) on a non-finite loss or gradient.
fn non_finite<L: LossTerms>(
    step: u64,
    terms: &L,
    what: &str,
    last_checkpoint: &Option<std::path::PathBuf>,
) -> TrainError {
    TrainError::NonFiniteLoss {
        step,
        terms: format!("non-finite {what}; {}", terms.describe()),
        last_checkpoint: last_checkpoint.clone(),
    }
}

//! One optimizer step of the PIDNet trainer: on the calling thread (`grad_accum` micro-batches
//! accumulated), or through the data-parallel replicas (`grad_accum` per device).

use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;
use segburn_data::EpochIter;

use super::accumulate::accumulate_gradients;
use super::micro_batch::{micro_batch_loss, StepSettings};
use super::{StepReport, TrainError, Trainer};
use crate::loss::PidNetLossValues;
use crate::mixed_precision::StepVerdict;
use crate::optim::unscale_and_clip;
use crate::run_schedule::StepTimer;

impl<B: AutodiffBackend> Trainer<B> {
    /// The settings of the next step: learning rate, loss scale, clipping, precision.
    fn step_settings(&self, total: u64) -> StepSettings {
        let train = &self.setup.train;
        StepSettings {
            lr: train.schedule.lr(train.lr, self.state.step, total),
            scale: self.state.loss_scaler.loss_factor(),
            clip: train.grad_clip_norm,
            dtype: train.precision.compute_dtype(),
            num_classes: self.setup.model.num_classes,
            ignore_index: self.setup.loss.ignore_index,
        }
    }

    /// The loss scaler's verdict on a step. Without loss scaling, a non-finite loss or
    /// gradient ends the run, naming the terms and the last good checkpoint.
    fn scaler_verdict(
        &mut self,
        mean: PidNetLossValues,
        finite_gradients: bool,
    ) -> Result<StepVerdict, TrainError> {
        let healthy = finite_gradients && mean.total.is_finite();
        if !healthy && !self.state.loss_scaler.enabled {
            return Err(TrainError::NonFiniteLoss {
                step: self.state.step,
                terms: mean,
                last_checkpoint: self.last_checkpoint.clone(),
            });
        }
        Ok(self.state.loss_scaler.update(finite_gradients))
    }

    /// One optimizer step over `grad_accum` micro-batches.
    pub(super) fn train_step(
        &mut self,
        batches: &mut EpochIter,
        total: u64,
        timer: &mut StepTimer,
        stop_at: u64,
    ) -> Result<StepReport, TrainError> {
        if self.replicas.is_some() {
            return self.train_step_parallel(batches, total, timer, stop_at);
        }
        let settings = self.step_settings(total);
        let accumulate = self.setup.train.grad_accum;
        let step_started = Instant::now();

        let mut mean = PidNetLossValues::default();
        let mut images = 0usize;
        let model = self.model.take().expect("model present during a step");
        let loss = &self.loss;
        let device = &self.device;
        let scaler_enabled = self.state.loss_scaler.enabled;
        let step = self.state.step;
        let last_checkpoint = &self.last_checkpoint;
        let batch_in_epoch = &mut self.state.batch_in_epoch;
        let accumulated = accumulate_gradients(&model, accumulate, settings.scale, |model, _| {
            let batch = batches.next().ok_or_else(|| {
                TrainError::Resume("the data loader ended before the epoch's last step".into())
            })??;
            images += batch.batch_size;
            let (total_loss, values) = micro_batch_loss(model, loss, batch, &settings, device)?;
            if !values.total.is_finite() && !scaler_enabled {
                return Err(TrainError::NonFiniteLoss {
                    step,
                    terms: values,
                    last_checkpoint: last_checkpoint.clone(),
                });
            }
            mean.add_share(&values, accumulate);
            *batch_in_epoch += 1;
            Ok(total_loss)
        });
        let mut grads = match accumulated {
            Ok(grads) => grads,
            Err(e) => {
                self.model = Some(model);
                return Err(e);
            }
        };
        self.model = Some(model);
        let summary = unscale_and_clip::<B::InnerBackend>(
            &mut grads,
            &self.params,
            settings.scale,
            settings.clip,
            &self.device,
        );
        let verdict = self.scaler_verdict(mean, summary.finite)?;
        if verdict == StepVerdict::Apply {
            let model = self.model.take().expect("model present during a step");
            self.model = Some(self.optimizer.step(settings.lr, model, grads));
        }
        self.state.step += 1;
        let seconds = step_started.elapsed().as_secs_f64();
        Ok(StepReport {
            step: self.state.step,
            total_steps: total,
            epoch: self.state.epoch,
            lr: settings.lr,
            loss: mean,
            grad_norm: summary.norm,
            loss_scale: settings.scale,
            skipped: verdict == StepVerdict::SkipOverflow,
            images_per_second: images as f64 / seconds.max(1e-9),
            eta_seconds: timer.eta(self.state.step, stop_at),
        })
    }

    /// One data-parallel step: `grad_accum` micro-batches for each replica, in loader order
    /// (replica r takes the r-th group), so the step sees the same micro-batches as a single
    /// device with `grad_accum × devices` accumulated.
    fn train_step_parallel(
        &mut self,
        batches: &mut EpochIter,
        total: u64,
        timer: &mut StepTimer,
        stop_at: u64,
    ) -> Result<StepReport, TrainError> {
        let train = &self.setup.train;
        let settings = self.step_settings(total);
        let started = Instant::now();
        let mut per_replica = Vec::with_capacity(self.devices.len());
        for _ in 0..self.devices.len() {
            let mut own = Vec::with_capacity(train.grad_accum);
            for _ in 0..train.grad_accum {
                own.push(batches.next().ok_or_else(|| {
                    TrainError::Resume("the data loader ended before the epoch's last step".into())
                })??);
            }
            per_replica.push(own);
        }
        let pool = self.replicas.as_ref().expect("checked by the caller");
        let results = pool.step(per_replica, settings)?;
        self.state.batch_in_epoch += self.micro_batches_per_step();
        let mut mean = PidNetLossValues::default();
        for result in &results {
            mean.add_share(&result.values, results.len());
        }
        let summary = results[0].summary;
        let verdict = self.scaler_verdict(mean, summary.finite)?;
        self.state.step += 1;
        let images: usize = results.iter().map(|r| r.images).sum();
        Ok(StepReport {
            step: self.state.step,
            total_steps: total,
            epoch: self.state.epoch,
            lr: settings.lr,
            loss: mean,
            grad_norm: summary.norm,
            loss_scale: settings.scale,
            skipped: verdict == StepVerdict::SkipOverflow,
            images_per_second: images as f64 / started.elapsed().as_secs_f64().max(1e-9),
            eta_seconds: timer.eta(self.state.step, stop_at),
        })
    }
}

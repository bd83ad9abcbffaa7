//! One optimizer step of the PIDNet trainer: on the calling thread (`grad_accum` micro-batches
//! accumulated), or through the data-parallel replicas (`grad_accum` per device).

use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;
use segburn_data::EpochIter;

use super::accumulate::accumulate_gradients;
use super::batch_tensors::DeviceBatch;
use super::replicas::StepSettings;
use super::{StepReport, TrainError, Trainer};
use crate::loss::PidNetLossValues;
use crate::mixed_precision::StepVerdict;
use crate::optim::unscale_and_clip;
use crate::run_schedule::StepTimer;

impl<B: AutodiffBackend> Trainer<B> {
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
        let train = &self.setup.train;
        let lr = train.schedule.lr(train.lr, self.state.step, total);
        let scale = self.state.loss_scaler.loss_factor();
        let dtype = train.precision.compute_dtype();
        let ignore = self.setup.loss.ignore_index;
        let num_classes = self.setup.model.num_classes;
        let accumulate = train.grad_accum;
        let step_started = Instant::now();

        let mut sums = [0.0f64; 5];
        let mut images = 0usize;
        let model = self.model.take().expect("model present during a step");
        let loss = &self.loss;
        let device = &self.device;
        let scaler_enabled = self.state.loss_scaler.enabled;
        let step = self.state.step;
        let last_checkpoint = &self.last_checkpoint;
        let batch_in_epoch = &mut self.state.batch_in_epoch;
        let accumulated = accumulate_gradients(&model, accumulate, scale, |model, _| {
            let batch = batches.next().ok_or_else(|| {
                TrainError::Resume("the data loader ended before the epoch's last step".into())
            })??;
            images += batch.batch_size;
            let device_batch = DeviceBatch::<B>::upload(batch, num_classes, ignore, dtype, device)?;
            let out = model.forward(device_batch.images)?;
            let terms = loss.forward_targets(
                out.p_aux,
                out.main,
                out.boundary,
                &device_batch.targets,
                device_batch.edges,
            )?;
            let values = terms.values();
            if !values.total.is_finite() && !scaler_enabled {
                return Err(TrainError::NonFiniteLoss {
                    step,
                    terms: values,
                    last_checkpoint: last_checkpoint.clone(),
                });
            }
            let all = [
                values.aux,
                values.main,
                values.boundary,
                values.bas,
                values.total,
            ];
            for (sum, v) in sums.iter_mut().zip(all) {
                *sum += v / accumulate as f64;
            }
            *batch_in_epoch += 1;
            Ok(terms.total)
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
            scale,
            train.grad_clip_norm,
            &self.device,
        );
        let mean = PidNetLossValues {
            aux: sums[0],
            main: sums[1],
            boundary: sums[2],
            bas: sums[3],
            total: sums[4],
        };
        if !summary.finite && !self.state.loss_scaler.enabled {
            return Err(TrainError::NonFiniteLoss {
                step: self.state.step,
                terms: mean,
                last_checkpoint: self.last_checkpoint.clone(),
            });
        }
        let verdict = self.state.loss_scaler.update(summary.finite);
        if verdict == StepVerdict::Apply {
            let model = self.model.take().expect("model present during a step");
            self.model = Some(self.optimizer.step(lr, model, grads));
        }
        self.state.step += 1;
        let seconds = step_started.elapsed().as_secs_f64();
        Ok(StepReport {
            step: self.state.step,
            total_steps: total,
            epoch: self.state.epoch,
            lr,
            loss: mean,
            grad_norm: summary.norm,
            loss_scale: scale,
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
        let settings = StepSettings {
            lr: train.schedule.lr(train.lr, self.state.step, total),
            scale: self.state.loss_scaler.loss_factor(),
            clip: train.grad_clip_norm,
            dtype: train.precision.compute_dtype(),
            num_classes: self.setup.model.num_classes,
            ignore_index: self.setup.loss.ignore_index,
        };
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
        let replicas = results.len() as f64;
        let mut values = [0.0f64; 5];
        for result in &results {
            for (sum, v) in values.iter_mut().zip(result.values) {
                *sum += v / replicas;
            }
        }
        let mean = PidNetLossValues {
            aux: values[0],
            main: values[1],
            boundary: values[2],
            bas: values[3],
            total: values[4],
        };
        let summary = results[0].summary;
        let healthy = summary.finite && mean.total.is_finite();
        if !healthy && !self.state.loss_scaler.enabled {
            return Err(TrainError::NonFiniteLoss {
                step: self.state.step,
                terms: mean,
                last_checkpoint: self.last_checkpoint.clone(),
            });
        }
        let verdict = self.state.loss_scaler.update(summary.finite);
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

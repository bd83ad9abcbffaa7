//! One SAM2 optimizer step: every object's interactive prompt steps, the multi-step loss,
//! backward, unscale + finite check + clip, AdamW.

use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;
use segburn_data::objects::ObjectEpochIter;

use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use segburn_models::sam2::DropPath;

use super::Sam2Trainer;
use crate::mixed_precision::StepVerdict;
use crate::optim::unscale_and_clip;
use crate::run_schedule::StepTimer;
use crate::sam::batch::{
    frozen_encoder_features, image_features, per_object, targets, truth_views,
};
use crate::sam::error::Sam2TrainError;
use crate::sam::events::{Sam2LossValues, Sam2StepReport};
use crate::sam::interactive::interactive_steps;
use crate::sam::prompts::TrainingPrompts;

impl<B: AutodiffBackend> Sam2Trainer<B> {
    /// One optimizer step on one batch of images.
    pub(super) fn train_step(
        &mut self,
        batches: &mut ObjectEpochIter,
        total: u64,
        timer: &StepTimer,
        stop_at: u64,
    ) -> Result<Sam2StepReport, Sam2TrainError> {
        let started = Instant::now();
        let train = &self.setup.train;
        let lr = train.schedule.lr(train.lr, self.state.step, total);
        let batch = batches.next().ok_or_else(|| {
            Sam2TrainError::Resume("the data loader ended before the epoch's last step".into())
        })??;
        self.state.batch_in_epoch += 1;
        let objects = batch.num_objects();
        let mut report = Sam2StepReport {
            step: self.state.step + 1,
            total_steps: total,
            epoch: self.state.epoch,
            lr,
            loss: None,
            grad_norm: 0.0,
            images: batch.num_images(),
            objects,
            seconds: 0.0,
            eta_seconds: 0.0,
            skipped: false,
        };
        if objects > 0 {
            let (loss, grad_norm, skipped) = self.optimize(&batch, lr)?;
            report.loss = Some(loss);
            report.grad_norm = grad_norm;
            report.skipped = skipped;
        }
        self.state.step += 1;
        report.seconds = started.elapsed().as_secs_f64();
        report.eta_seconds = timer.eta(self.state.step, stop_at);
        Ok(report)
    }

    /// Forward over every prompt step (in the compute precision), loss (f32), scaled
    /// backward, unscale + finite check + clip, optimizer step. Returns the loss terms, the
    /// gradient norm, and whether the loss scaler skipped the step (an F16 overflow).
    fn optimize(
        &mut self,
        batch: &segburn_data::objects::ObjectBatch,
        lr: f64,
    ) -> Result<(Sam2LossValues, f64, bool), Sam2TrainError> {
        let setup = &self.setup;
        let model = self.model.as_ref().expect("model present during a step");
        let objects = batch.num_objects();
        let dtype = setup.train.precision.compute_dtype();
        let frozen = setup.model.freeze_image_encoder;
        // Stochastic depth in a trained Hiera trunk, drawn from (seed, step): a resumed run
        // drops the same branches. A frozen encoder runs as in evaluation.
        let rate = setup.model.image_encoder.drop_path_rate();
        let drop_path = (!frozen && rate > 0.0).then_some(DropPath {
            rate,
            seed: setup.train.seed,
            step: self.state.step,
        });
        let encode = |images: Tensor<B, 4>| {
            if frozen {
                frozen_encoder_features(model, images)
            } else {
                model.forward_image_with(images, drop_path.as_ref())
            }
        };
        let features = image_features(model, batch, &encode, dtype, &self.device)?;
        let features = per_object(&features, &batch.object_image);
        let truths = truth_views(batch);
        let mut prompts =
            TrainingPrompts::new(&setup.prompts, setup.train.seed, self.state.step, objects);
        let output = interactive_steps(
            model,
            &features,
            &truths,
            &mut prompts,
            setup.prompts.correction_steps,
            setup.train.gate_masks_by_object_score,
        )?;
        let terms =
            self.loss
                .forward(&output.steps, targets(batch, &self.device), objects as f32)?;
        let core = terms.core_loss(&setup.loss);
        // One download for all five numbers.
        let values: Vec<f64> = Tensor::cat(
            vec![
                core.clone(),
                terms.loss_mask,
                terms.loss_dice,
                terms.loss_iou,
                terms.loss_class,
            ],
            0,
        )
        .into_data()
        .iter::<f64>()
        .collect();
        let loss = Sam2LossValues {
            total: values[0],
            mask: values[1],
            dice: values[2],
            iou: values[3],
            class: values[4],
        };
        let non_finite = |what: &str| Sam2TrainError::NonFiniteLoss {
            step: self.state.step,
            loss: format!(
                "{what}: total {:?}, mask {:?}, dice {:?}, iou {:?}, class {:?}",
                loss.total, loss.mask, loss.dice, loss.iou, loss.class
            ),
            last_checkpoint: self.last_checkpoint.clone(),
        };
        // With the loss scaler on (F16), an overflow skips the step instead of stopping.
        let scaler = &self.state.loss_scaler;
        if !loss.total.is_finite() && !scaler.enabled {
            return Err(non_finite("loss"));
        }
        let scale = scaler.loss_factor();
        let mut grads = GradientsParams::from_grads((core * scale).backward(), model);
        let summary = unscale_and_clip::<B::InnerBackend>(
            &mut grads,
            &self.params,
            scale,
            setup.train.grad_clip_norm,
            &self.device,
        );
        if !summary.finite && !scaler.enabled {
            return Err(non_finite("gradients"));
        }
        let verdict = self.state.loss_scaler.update(summary.finite);
        if verdict == StepVerdict::Apply {
            let model = self.model.take().expect("model present during a step");
            self.model = Some(self.optimizer.step(lr, model, grads));
        }
        Ok((loss, summary.norm, verdict == StepVerdict::SkipOverflow))
    }
}

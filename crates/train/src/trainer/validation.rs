//! Validation during training: the full-resolution evaluation of the validation split, and
//! its record in the run's history, log, metrics and events.

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;

use super::{log_error, MetricsRow, Observer, TrainError, TrainEvent, Trainer};
use crate::inference::{Evaluator, InferenceConfig};
use crate::metric::MetricReport;

impl<B: AutodiffBackend> Trainer<B> {
    /// Evaluates the validation split at full resolution (main head, bilinear upsampling with
    /// align_corners = true, as the official evaluation).
    pub fn validate(&self) -> Result<MetricReport, TrainError> {
        let Some(loader) = &self.val_loader else {
            return Err(TrainError::Config(
                "validation is disabled in this configuration".into(),
            ));
        };
        let model = self.model().valid();
        let inference = InferenceConfig::whole(self.setup.train.precision);
        let evaluator = Evaluator::<B::InnerBackend, _>::new(
            &model,
            inference,
            self.setup.model.num_classes,
            self.setup.loss.ignore_index,
            self.device.clone(),
        )?;
        let matrix = evaluator.run(loader, &mut |_| Ok(()))?;
        Ok(MetricReport::new(&matrix, &self.class_names)?)
    }

    pub(super) fn validate_and_record(
        &mut self,
        observer: &mut dyn Observer,
    ) -> Result<MetricReport, TrainError> {
        // With replicas, this trainer's copy of the model is only as new as the last refresh.
        self.refresh_model_from_replicas()?;
        let report = self.validate()?;
        let step = self.state.step;
        self.state.history.push((step, report.mean_iou));
        if self
            .state
            .best_metric
            .is_none_or(|(best, _)| report.mean_iou > best)
        {
            self.state.best_metric = Some((report.mean_iou, step));
        }
        let line = format!(
            "validation at step {step}: mIoU {:.4} (all-classes mean {:.4}), pixel accuracy {:.4}, mean class accuracy {:.4}",
            report.mean_iou, report.mean_iou_all_classes, report.pixel_accuracy, report.mean_class_accuracy
        );
        self.log.line(&line).map_err(log_error(self.log.dir()))?;
        self.log
            .line(&report.to_string())
            .map_err(log_error(self.log.dir()))?;
        let row = MetricsRow {
            kind: "val",
            step,
            epoch: self.state.epoch,
            mean_iou: Some(report.mean_iou),
            pixel_accuracy: Some(report.pixel_accuracy),
            ..MetricsRow::default()
        };
        self.log.metrics(&row).map_err(log_error(self.log.dir()))?;
        observer.event(&TrainEvent::Validation {
            step,
            report: Box::new(report.clone()),
        });
        Ok(report)
    }
}

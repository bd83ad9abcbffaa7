//! Validation during PIDNet training: the full-resolution evaluation of the validation split
//! (main head, bilinear upsampling with align_corners = true, as the official evaluation), and
//! the report as the engine logs it.

use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use segburn_models::pidnet::PidNet;

use super::PidNetTask;
use crate::engine::{TrainError, ValidationReport};
use crate::inference::{Evaluator, InferenceConfig};
use crate::metric::MetricReport;

impl PidNetTask {
    pub(super) fn evaluate<B: AutodiffBackend>(
        &self,
        model: &PidNet<B>,
        device: &B::Device,
    ) -> Result<MetricReport, TrainError> {
        let Some(loader) = &self.val_loader else {
            return Err(TrainError::Config(
                "validation is disabled in this configuration".into(),
            ));
        };
        let model = model.valid();
        let evaluator = Evaluator::<B::InnerBackend, _>::new(
            &model,
            InferenceConfig::whole(self.precision),
            self.model.num_classes,
            i64::from(self.data.ignore_index),
            device.clone(),
        )?;
        let matrix = evaluator.run(loader, &mut |_| Ok(()))?;
        Ok(MetricReport::new(&matrix, &self.class_names)?)
    }
}

impl ValidationReport for MetricReport {
    const COLUMNS: &'static [&'static str] = &["mean_iou", "pixel_accuracy"];

    fn headline(&self) -> f64 {
        self.mean_iou
    }

    fn columns(&self) -> Vec<Option<f64>> {
        vec![Some(self.mean_iou), Some(self.pixel_accuracy)]
    }

    fn log_text(&self, step: u64) -> String {
        format!(
            "validation at step {step}: mIoU {:.4} (all-classes mean {:.4}), pixel accuracy {:.4}, mean class accuracy {:.4}\n{self}",
            self.mean_iou, self.mean_iou_all_classes, self.pixel_accuracy, self.mean_class_accuracy
        )
    }

    fn summary(&self) -> String {
        format!(
            "validation mIoU {:.4} (all-classes mean {:.4})",
            self.mean_iou, self.mean_iou_all_classes
        )
    }
}

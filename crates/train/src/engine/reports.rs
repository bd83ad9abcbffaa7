//! What a run records besides checkpoints: a line and a metrics row per logged step, and each
//! validation in the run's history (best metric), log, metrics files and events.

use burn::tensor::backend::AutodiffBackend;

use super::task::{LossTerms, Task, Terms, ValidationReport};
use super::{log_error, Engine, MetricsRow, StepReport, TaskObserver, TrainError, TrainEvent};

impl<B: AutodiffBackend, T: Task<B>> Engine<B, T> {
    /// The metrics row of a step or a validation: every column of the task, `None` where the
    /// row has no value.
    fn metrics_row(
        &self,
        kind: &'static str,
        lr: f64,
        step: Option<&StepReport<Terms<B, T>>>,
        validation: Option<&T::Validation>,
    ) -> MetricsRow {
        let mut columns = Vec::new();
        let terms = step.map(|s| s.loss.columns());
        for (k, name) in Terms::<B, T>::COLUMNS.iter().enumerate() {
            columns.push((*name, terms.as_ref().and_then(|t| t[k])));
        }
        columns.push(("grad_norm", step.map(|s| s.grad_norm)));
        columns.push(("loss_scale", step.map(|s| s.loss_scale)));
        columns.push(("images_per_second", step.map(|s| s.images_per_second)));
        let values = validation.map(|v| v.columns());
        for (k, name) in T::Validation::COLUMNS.iter().enumerate() {
            columns.push((*name, values.as_ref().and_then(|v| v[k])));
        }
        MetricsRow {
            kind,
            step: self.state.step,
            epoch: self.state.epoch,
            lr,
            columns,
        }
    }

    pub(super) fn log_step(&mut self, report: &StepReport<Terms<B, T>>) -> Result<(), TrainError> {
        let line = format!(
            "step {}/{} epoch {} lr {:.3e} {} grad-norm {:.3} scale {} {:.2} img/s{}",
            report.step,
            report.total_steps,
            report.epoch,
            report.lr,
            report.loss.describe(),
            report.grad_norm,
            report.loss_scale,
            report.images_per_second,
            if report.skipped {
                " [skipped: gradient overflow]"
            } else {
                ""
            }
        );
        self.log.line(&line).map_err(log_error(self.log.dir()))?;
        let row = self.metrics_row("train", report.lr, Some(report), None);
        self.log.metrics(&row).map_err(log_error(self.log.dir()))
    }

    /// Evaluates the validation split with the current weights.
    pub fn validate(&self) -> Result<T::Validation, TrainError> {
        if !self.task.can_validate() {
            return Err(TrainError::Config(
                "validation is disabled in this configuration (train.validate_at_end: false, \
                 train.validate_every_epochs: 0 and no train.validate_every_steps)"
                    .into(),
            ));
        }
        self.task.validate(self.model(), &self.device)
    }

    pub(super) fn validate_and_record(
        &mut self,
        observer: &mut TaskObserver<'_, B, T>,
    ) -> Result<T::Validation, TrainError> {
        // With replicas, this run's copy of the model is only as new as the last refresh.
        self.refresh_model_from_replicas()?;
        let report = self.validate()?;
        let step = self.state.step;
        let headline = report.headline();
        self.state.history.push((step, headline));
        if self
            .state
            .best_metric
            .is_none_or(|(best, _)| headline > best)
        {
            self.state.best_metric = Some((headline, step));
        }
        self.log
            .line(&report.log_text(step))
            .map_err(log_error(self.log.dir()))?;
        let row = self.metrics_row("val", 0.0, None, Some(&report));
        self.log.metrics(&row).map_err(log_error(self.log.dir()))?;
        observer.event(&TrainEvent::Validation {
            step,
            report: Box::new(report.clone()),
        });
        Ok(report)
    }
}

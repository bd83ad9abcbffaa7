//! Where a run's weights come from and go to: a checkpoint of the current state (saved,
//! pointers updated, old files rotated), weights only from a file (`--init-from`), or the
//! exact resume of a checkpoint (weights, optimizer state and position).

use std::path::{Path, PathBuf};

use burn::tensor::backend::AutodiffBackend;
use segburn_models::weights::LoadReport;
use serde::Serialize;

use super::resume_rules::{ResumeDifferences, ResumeRules};
use super::task::Task;
use super::{log_error, Engine, TaskObserver, TrainError, TrainEvent};
use crate::checkpoint::{load_checkpoint, Checkpoint, SavedCheckpoint};

impl<B: AutodiffBackend, T: Task<B>> Engine<B, T> {
    /// Saves a checkpoint of the current state, updates the pointers and rotates old files.
    pub fn save(&mut self, observer: &mut TaskObserver<'_, B, T>) -> Result<PathBuf, TrainError> {
        self.refresh_model_from_replicas()?;
        let step = self.state.step;
        let model = self.task.export_model(self.model());
        let optimizer = self.optimizer_state()?;
        let SavedCheckpoint {
            path,
            bytes,
            seconds,
        } = self.checkpoints.save_step(
            &self.state,
            &self.experiment_text,
            &model,
            &optimizer,
            &self.train.retention,
        )?;
        self.last_checkpoint = Some(path.clone());
        let message = format!(
            "saved {} ({:.1} MB, {seconds:.2} s)",
            path.display(),
            bytes as f64 / 1e6
        );
        self.log.line(&message).map_err(log_error(self.log.dir()))?;
        observer.event(&TrainEvent::Checkpoint {
            step,
            path: path.clone(),
            bytes,
            seconds,
        });
        Ok(path)
    }

    /// Rebuilds the model after a failed load consumed it, so the run stays usable.
    fn restore_model(&mut self) {
        self.model = Some(self.task.init_model(&self.device));
    }

    /// Starts from weights only (an official file or a segburn checkpoint's model): the task
    /// loads what it can and reports the rest.
    pub fn init_weights_from(&mut self, path: &Path) -> Result<LoadReport, TrainError> {
        self.replicas = None;
        let model = self.model.take().expect("model present between steps");
        match self.task.load_initial(model, path) {
            Ok((model, report)) => {
                self.model = Some(model);
                Ok(report)
            }
            Err(e) => {
                self.restore_model();
                Err(e)
            }
        }
    }

    /// Restores model, optimizer and position from a checkpoint of this run.
    pub fn resume(&mut self, path: &Path) -> Result<(), TrainError> {
        self.resume_from(load_checkpoint(path)?)
    }

    /// The differences between the experiment `checkpoint` was saved with (`saved`, parsed by
    /// the caller into its experiment type) and this run's (`current`): those a resume
    /// cannot follow (the task's fields, the seed, the micro-batches per step) and the
    /// harmless rest.
    pub fn resume_differences<E: Serialize>(
        &self,
        checkpoint: &Checkpoint,
        saved: &E,
        current: &E,
    ) -> ResumeDifferences {
        ResumeRules {
            breaking: self.task.resume_breaking_fields(),
            micro_batches_per_step: self.micro_batches_per_step(),
        }
        .compare(checkpoint, saved, current)
    }

    /// [`Engine::resume`] from a checkpoint already loaded (and so verified).
    pub fn resume_from(&mut self, checkpoint: Checkpoint) -> Result<(), TrainError> {
        self.replicas = None;
        let path = checkpoint.path.as_path();
        self.task.check_resumable(&checkpoint.model, path)?;
        let model = self.model.take().expect("model present between steps");
        let model = match self.task.load_exact(model, &checkpoint.model, path) {
            Ok(model) => model,
            Err(e) => {
                self.restore_model();
                return Err(e);
            }
        };
        self.model = Some(model);
        let fresh = self.task.optimizer(&self.params)?;
        let optimizer = std::mem::replace(&mut self.optimizer, fresh);
        self.optimizer = optimizer.import(&checkpoint.optimizer, &self.device);
        let train = &self.train;
        let mut state = checkpoint.meta.state.resumed(
            train.seed,
            &train.loss_scaler,
            train.precision.uses_loss_scaling(),
            path,
        )?;
        state.micro_batches_per_step = Some(self.micro_batches_per_step());
        self.state = state;
        self.last_checkpoint = Some(path.to_path_buf());
        let message = self.state.resumed_message(path);
        self.log.line(&message).map_err(log_error(self.log.dir()))
    }
}

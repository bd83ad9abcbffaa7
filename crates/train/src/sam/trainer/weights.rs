//! Where a run's weights come from besides a fresh init: `--init-from` (weights only) and
//! `--resume` (weights, optimizer state and position).

use std::path::Path;

use burn::tensor::backend::AutodiffBackend;
use segburn_models::weights::LoadReport;

use super::{log_error, Sam2Trainer, ENCODER_PREFIX};
use crate::checkpoint::{load_checkpoint, Checkpoint};
use crate::sam::error::Sam2TrainError;
use segburn_models::sam2::import;

impl<B: AutodiffBackend> Sam2Trainer<B> {
    /// Rebuilds the model after a failed load consumed it, so the trainer stays usable.
    fn restore_model(&mut self) {
        self.model = Some(self.setup.model.sam2().init::<B>(&self.device));
    }

    /// Starts from weights only: an official SAM2/SAM2.1 checkpoint (`{"model": …}` `.pt` or
    /// `.safetensors`) or a segburn checkpoint.
    ///
    /// With the Hiera encoder the load is strict: the file must hold the whole image model
    /// (encoder, `no_mem_embed`, heads) with the right shapes; the video-memory keys of an
    /// official file are listed as not used. With our CNN encoder, an official file gives the
    /// heads only (its Hiera keys are listed as unexpected and our encoder keeps its weights).
    pub fn init_weights_from(&mut self, path: &Path) -> Result<LoadReport, Sam2TrainError> {
        let strict = self.setup.model.image_encoder.is_hiera();
        let model = self.model.take().expect("model present between steps");
        let name = path.display().to_string();
        let loaded = match load_checkpoint(path) {
            Ok(checkpoint) => import::load_sam2_tensors(model, &checkpoint.model, strict, &name),
            Err(e) if e.may_be_other_weights() => import::load_official(model, path, strict),
            Err(e) => {
                self.restore_model();
                return Err(e.into());
            }
        };
        match loaded {
            Ok((model, report)) => {
                self.model = Some(model);
                Ok(report)
            }
            Err(e) => {
                self.restore_model();
                Err(e.into())
            }
        }
    }

    /// Restores model, optimizer and position from a checkpoint of this run.
    pub fn resume(&mut self, path: &Path) -> Result<(), Sam2TrainError> {
        self.resume_from(load_checkpoint(path)?)
    }

    /// [`Sam2Trainer::resume`] from a checkpoint already loaded (and so verified).
    pub fn resume_from(&mut self, checkpoint: Checkpoint) -> Result<(), Sam2TrainError> {
        let path = checkpoint.path.as_path();
        let has_encoder = self.model().image_encoder.is_some();
        let saved_encoder = checkpoint
            .model
            .keys()
            .any(|k| k.starts_with(ENCODER_PREFIX));
        if has_encoder != saved_encoder {
            return Err(Sam2TrainError::Resume(format!(
                "{} was saved {} an image encoder but model.image_encoder is {}",
                path.display(),
                if saved_encoder { "with" } else { "without" },
                if has_encoder { "set" } else { "None" }
            )));
        }
        let model = self.model.take().expect("model present between steps");
        let name = path.display().to_string();
        let model = match import::load_sam2_tensors(model, &checkpoint.model, true, &name) {
            Ok((model, _)) => model,
            Err(e) => {
                self.restore_model();
                return Err(e.into());
            }
        };
        self.model = Some(model);
        let fresh = super::build_optimizer(&self.setup, &self.params)?;
        let optimizer = std::mem::replace(&mut self.optimizer, fresh);
        self.optimizer = optimizer.import(&checkpoint.optimizer, &self.device);
        let train = &self.setup.train;
        self.state = checkpoint
            .meta
            .state
            .resumed(
                train.seed,
                &train.loss_scaler,
                train.precision.uses_loss_scaling(),
                path,
            )
            .map_err(Sam2TrainError::Resume)?;
        self.last_checkpoint = Some(path.to_path_buf());
        let message = self.state.resumed_message(path);
        self.log.line(&message).map_err(log_error(self.log.dir()))
    }
}

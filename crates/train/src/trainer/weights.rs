//! Where a PIDNet run's weights come from: an initialisation (official `.pt`, an ImageNet
//! backbone, a segburn checkpoint's model) or the exact resume of a checkpoint of this run.

use std::path::Path;

use burn::tensor::backend::AutodiffBackend;
use segburn_models::pidnet::{load_pidnet, load_pidnet_tensors, LoadMode};
use segburn_models::weights::LoadReport;

use super::{log_error, TrainError, Trainer};
use crate::checkpoint::{load_checkpoint, Checkpoint};
use crate::optim::OptimizerSet;

impl<B: AutodiffBackend> Trainer<B> {
    /// Starts from weights only (official `.pt`, an ImageNet backbone, or a segburn
    /// checkpoint's model): loads what matches and reports the rest.
    pub fn init_weights_from(&mut self, path: &Path) -> Result<LoadReport, TrainError> {
        self.replicas = None;
        let model = self.model.take().expect("model present between steps");
        let loaded = match load_checkpoint(path) {
            Ok(checkpoint) => {
                load_pidnet_tensors(model, &checkpoint.model, path, LoadMode::Partial)
            }
            Err(_) => load_pidnet(model, path, LoadMode::Partial),
        };
        match loaded {
            Ok((model, report)) => {
                self.model = Some(model);
                Ok(report)
            }
            Err(e) => {
                // The model was consumed by the failed load; rebuild it so the trainer stays usable.
                self.model = Some(self.setup.model.init::<B>(&self.device));
                Err(e.into())
            }
        }
    }

    /// Restores model, optimizer and position from a checkpoint of this run.
    pub fn resume(&mut self, path: &Path) -> Result<(), TrainError> {
        self.resume_from(load_checkpoint(path)?)
    }

    /// [`Trainer::resume`] from a checkpoint already loaded (and so verified).
    pub fn resume_from(&mut self, checkpoint: Checkpoint) -> Result<(), TrainError> {
        self.replicas = None;
        let path = checkpoint.path.as_path();
        let model = self.model.take().expect("model present between steps");
        let (model, _) = match load_pidnet_tensors(model, &checkpoint.model, path, LoadMode::Strict)
        {
            Ok(loaded) => loaded,
            Err(e) => {
                self.model = Some(self.setup.model.init::<B>(&self.device));
                return Err(e.into());
            }
        };
        self.model = Some(model);
        let optimizer = std::mem::replace(
            &mut self.optimizer,
            OptimizerSet::new(
                &self.setup.train.optimizer,
                &self.setup.train.param_groups,
                &self.params,
            ),
        );
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
            .map_err(TrainError::Resume)?;
        self.last_checkpoint = Some(path.to_path_buf());
        let message = self.state.resumed_message(path);
        self.log.line(&message).map_err(log_error(self.log.dir()))?;
        Ok(())
    }
}

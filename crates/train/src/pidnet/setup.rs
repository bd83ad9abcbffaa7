//! What a PIDNet run needs (the sections of its experiment), and the one check of them all:
//! the cli checks an experiment file with it, and the task checks its set-up with it. What
//! needs the data read (`model.num_classes` against the dataset's classes) is checked when the
//! task indexes the data; the engine checks what it owns (`train` against the batches of an
//! epoch) when a run starts.

use segburn_data::{DataConfig, DataError};
use segburn_models::pidnet::PidNetConfig;

use super::recipe::PidNetTrainConfig;
use crate::engine::{TrainConfigError, TrainError};
use crate::loss::{LossError, PidNetLossConfig};

/// The pieces of a PIDNet experiment the engine needs.
#[derive(Debug, Clone)]
pub struct PidNetSetup {
    pub model: PidNetConfig,
    pub data: DataConfig,
    /// The loss; its `ignore_index` is the data's (set when the task is built).
    pub loss: PidNetLossConfig,
    pub train: PidNetTrainConfig,
    /// The fully resolved experiment as text, stored in every checkpoint.
    pub experiment_text: String,
}

/// A section of a PIDNet experiment that cannot work; the message names the field and the
/// value.
#[derive(Debug, thiserror::Error)]
pub enum PidNetSetupError {
    #[error("model.num_classes: must be at least 1")]
    NoClasses,
    #[error(transparent)]
    Train(#[from] TrainConfigError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("loss: {0}")]
    Loss(#[source] LossError),
    #[error(
        "loss.class_weights has {weights} values but model.num_classes is {num_classes}: give \
         one weight per class, Uniform, or FromData()"
    )]
    ClassWeightCount { weights: usize, num_classes: usize },
}

impl PidNetSetup {
    /// Checks every section that can be checked without reading the data; the error names the
    /// field.
    pub fn check(&self) -> Result<(), PidNetSetupError> {
        if self.model.num_classes == 0 {
            return Err(PidNetSetupError::NoClasses);
        }
        self.train.check()?;
        self.data.check()?;
        self.loss.check().map_err(PidNetSetupError::Loss)?;
        if let Some(weights) = self.loss.class_weights.values() {
            if weights.len() != self.model.num_classes {
                return Err(PidNetSetupError::ClassWeightCount {
                    weights: weights.len(),
                    num_classes: self.model.num_classes,
                });
            }
        }
        Ok(())
    }
}

/// The data and loss errors stay what the task reported before it checked its whole set-up (a
/// caller can still tell a data problem from the rest).
impl From<PidNetSetupError> for TrainError {
    fn from(error: PidNetSetupError) -> Self {
        match error {
            PidNetSetupError::Train(error) => TrainError::TrainConfig(error),
            PidNetSetupError::Data(error) => TrainError::Data(error),
            PidNetSetupError::Loss(error) => TrainError::Loss(error),
            other => TrainError::TaskConfig(Box::new(other)),
        }
    }
}

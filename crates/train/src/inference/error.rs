//! Why an inference or an evaluation failed.

use segburn_data::DataError;
use segburn_models::pidnet::PidNetError;

use crate::engine::TrainError;
use crate::metric::MetricError;

/// An inference or evaluation error.
#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    /// An impossible setting (names the setting).
    #[error("inference settings: {0}")]
    Config(String),
    /// The network refused its input.
    #[error(transparent)]
    Model(#[from] PidNetError),
    /// Reading the validation data failed (names the file).
    #[error(transparent)]
    Data(#[from] DataError),
    /// The confusion matrix refused an update (e.g. a label outside the classes).
    #[error(transparent)]
    Metric(#[from] MetricError),
    /// The per-batch callback of [`Evaluator::run`](super::Evaluator::run) failed.
    #[error("{0}")]
    Callback(Box<dyn std::error::Error + Send + Sync>),
}

/// PIDNet's validation runs through the [`Evaluator`](super::Evaluator).
impl From<InferenceError> for TrainError {
    fn from(error: InferenceError) -> Self {
        match error {
            InferenceError::Model(e) => TrainError::PidNet(e),
            InferenceError::Data(e) => TrainError::Data(e),
            InferenceError::Metric(e) => TrainError::Metric(e),
            other => TrainError::Config(other.to_string()),
        }
    }
}

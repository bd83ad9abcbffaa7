//! PIDNet's `train` section defaults: the official Cityscapes recipe (484 epochs, SGD 0.01 /
//! 0.9 / 5e-4, poly 0.9, seed 304, validation every 5 epochs), and the class weights computed
//! from the data when the loss asks for them.

use std::path::PathBuf;

use segburn_data::DataConfig;

use crate::engine::{TrainConfig, TrainError, TrainRecipe};
use crate::loss::PidNetLossConfig;
use crate::optim::{LrSchedule, OptimizerConfig};

/// The official PIDNet recipe's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PidNetRecipe;

/// The `train` section of a PIDNet experiment.
pub type PidNetTrainConfig = TrainConfig<PidNetRecipe>;

impl TrainRecipe for PidNetRecipe {
    fn defaults() -> TrainConfig<Self> {
        TrainConfig {
            epochs: 484,
            lr: 0.01,
            schedule: LrSchedule::default(),
            optimizer: OptimizerConfig::default(),
            seed: 304,
            validate_every_epochs: 5,
            run_dir: PathBuf::from("checkpoints/run"),
            ..TrainConfig::base()
        }
    }
}

/// Computes `FromData` class weights from the pixel counts of the training split (every label
/// is decoded once); other class weights are left as they are. Call it before recording the
/// experiment, so that the run's resolved experiment carries the weights it trains with.
pub fn resolve_class_weights(
    loss: &mut PidNetLossConfig,
    data: &DataConfig,
) -> Result<(), TrainError> {
    if loss.class_weights.needs_data() {
        let counts = segburn_data::class_pixel_counts(data, &data.train_split)?;
        loss.class_weights.compute(&counts)?;
    }
    Ok(())
}

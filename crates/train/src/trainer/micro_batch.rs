//! What the plain and the replica step paths share: the settings of one step and one
//! micro-batch through the network and the loss.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use segburn_data::Batch;
use segburn_models::pidnet::PidNet;

use super::batch_tensors::DeviceBatch;
use super::error::TrainError;
use crate::loss::{PidNetLoss, PidNetLossValues};

/// The settings of one step, the same for every replica.
#[derive(Clone, Copy)]
pub(crate) struct StepSettings {
    pub lr: f64,
    pub scale: f64,
    pub clip: Option<f64>,
    pub dtype: burn::tensor::FloatDType,
    pub num_classes: usize,
    pub ignore_index: i64,
}

/// One micro-batch through the network and the loss, as every step path runs it: the total
/// to differentiate and the host values of every term.
pub(super) fn micro_batch_loss<B: AutodiffBackend>(
    model: &PidNet<B>,
    loss: &PidNetLoss,
    batch: Batch,
    settings: &StepSettings,
    device: &B::Device,
) -> Result<(Tensor<B, 1>, PidNetLossValues), TrainError> {
    let inputs = DeviceBatch::<B>::upload(
        batch,
        settings.num_classes,
        settings.ignore_index,
        settings.dtype,
        device,
    )?;
    let out = model.forward(inputs.images)?;
    let terms = loss.forward_targets(
        out.p_aux,
        out.main,
        out.boundary,
        &inputs.targets,
        inputs.edges,
    )?;
    let values = terms.values();
    Ok((terms.total, values))
}

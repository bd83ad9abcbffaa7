//! One PIDNet micro-batch through the network and the composite loss, as every step path (the
//! calling thread, each data-parallel replica) runs it; and the loss terms as the engine
//! reports them.

use burn::tensor::backend::AutodiffBackend;
use segburn_data::Batch;
use segburn_models::pidnet::PidNet;

use super::batch_tensors::DeviceBatch;
use crate::engine::{LossTerms, MicroBatch, MicroBatchLoss, TaskStep, TrainError};
use crate::loss::{PidNetLoss, PidNetLossValues};

/// What a PIDNet micro-batch needs besides the model: the loss and how labels are read.
#[derive(Debug, Clone)]
pub struct PidNetStep {
    pub loss: PidNetLoss,
    pub num_classes: usize,
    pub ignore_index: i64,
}

impl<B: AutodiffBackend> TaskStep<B> for PidNetStep {
    type Model = PidNet<B>;
    type Batch = Batch;
    type Terms = PidNetLossValues;

    fn images(batch: &Batch) -> usize {
        batch.batch_size
    }

    fn loss(
        &self,
        model: &PidNet<B>,
        batch: Batch,
        at: &MicroBatch,
        device: &B::Device,
    ) -> Result<MicroBatchLoss<B, PidNetLossValues>, TrainError> {
        let inputs =
            DeviceBatch::<B>::upload(batch, self.num_classes, self.ignore_index, at.dtype, device)?;
        let out = model.forward(inputs.images)?;
        let terms = self.loss.forward_targets(
            out.p_aux,
            out.main,
            out.boundary,
            &inputs.targets,
            inputs.edges,
        )?;
        Ok(MicroBatchLoss {
            terms: terms.values(),
            objective: Some(terms.total),
        })
    }
}

impl LossTerms for PidNetLossValues {
    const COLUMNS: &'static [&'static str] =
        &["loss", "loss_aux", "loss_main", "loss_boundary", "loss_bas"];

    fn total(&self) -> f64 {
        self.total
    }

    fn add_share(&mut self, other: &Self, count: usize) {
        PidNetLossValues::add_share(self, other, count)
    }

    fn columns(&self) -> Vec<Option<f64>> {
        [self.total, self.aux, self.main, self.boundary, self.bas]
            .map(Some)
            .to_vec()
    }

    fn describe(&self) -> String {
        format!(
            "loss {:.4} (aux {:.4} main {:.4} boundary {:.4} bas {:.4})",
            self.total, self.aux, self.main, self.boundary, self.bas
        )
    }
}

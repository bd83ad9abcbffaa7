//! One SAM2 micro-batch through the model and the loss, as every step path (the calling
//! thread, each data-parallel replica) runs it: the image features (the encoder trained,
//! frozen, or cached embeddings), every object's interactive prompt steps, the multi-step loss.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use segburn_data::objects::ObjectBatch;
use segburn_models::sam2::{DropPath, Sam2};

use super::batch::{frozen_encoder_features, image_features, per_object, targets, truth_views};
use super::interactive::interactive_steps;
use super::prompts::{PromptConfig, TrainingPrompts};
use super::step_losses::{Sam2LossValues, Sam2StepLosses};
use crate::engine::{MicroBatch, MicroBatchLoss, TaskStep, TrainError};
use crate::loss::sam::{SamLoss, SamLossConfig};

/// What a SAM2 micro-batch needs besides the model.
#[derive(Debug, Clone)]
pub struct Sam2Step {
    pub loss: SamLoss,
    pub loss_config: SamLossConfig,
    pub prompts: PromptConfig,
    pub freeze_image_encoder: bool,
    /// Stochastic depth of a trained Hiera trunk (0: none).
    pub drop_path_rate: f64,
    pub gate_masks_by_object_score: bool,
}

impl<B: AutodiffBackend> TaskStep<B> for Sam2Step {
    type Model = Sam2<B>;
    type Batch = ObjectBatch;
    type Terms = Sam2StepLosses;

    fn images(batch: &ObjectBatch) -> usize {
        batch.num_images()
    }

    /// Forward over every prompt step (in the compute precision) and the loss (f32). A batch
    /// without objects has nothing to learn from.
    fn loss(
        &self,
        model: &Sam2<B>,
        batch: ObjectBatch,
        at: &MicroBatch,
        device: &B::Device,
    ) -> Result<MicroBatchLoss<B, Sam2StepLosses>, TrainError> {
        let objects = batch.num_objects();
        if objects == 0 {
            return Ok(MicroBatchLoss {
                objective: None,
                terms: Sam2StepLosses::of(None, 0),
            });
        }
        let frozen = self.freeze_image_encoder;
        // Stochastic depth in a trained Hiera trunk, drawn from (seed, step, micro-batch): a
        // resumed run drops the same branches. A frozen encoder runs as in evaluation.
        let drop_path = (!frozen && self.drop_path_rate > 0.0).then_some(DropPath {
            rate: self.drop_path_rate,
            seed: at.seed,
            step: at.step,
            micro_batch: at.index as u64,
        });
        let encode = |images: Tensor<B, 4>| {
            if frozen {
                frozen_encoder_features(model, images)
            } else {
                model.forward_image_with(images, drop_path.as_ref())
            }
        };
        let features = image_features(model, &batch, &encode, at.dtype, device)?;
        let features = per_object(&features, &batch.object_image);
        let truths = truth_views(&batch);
        let mut prompts = TrainingPrompts::new(&self.prompts, at.seed, at.step, at.index, objects);
        let output = interactive_steps(
            model,
            &features,
            &truths,
            &mut prompts,
            self.prompts.correction_steps,
            self.gate_masks_by_object_score,
        )?;
        let terms = self
            .loss
            .forward(&output.steps, targets(&batch, device), objects as f32)?;
        let core = terms.core_loss(&self.loss_config);
        // One download for all five numbers.
        let values: Vec<f64> = Tensor::cat(
            vec![
                core.clone(),
                terms.loss_mask,
                terms.loss_dice,
                terms.loss_iou,
                terms.loss_class,
            ],
            0,
        )
        .into_data()
        .iter::<f64>()
        .collect();
        let values = Sam2LossValues {
            total: values[0],
            mask: values[1],
            dice: values[2],
            iou: values[3],
            class: values[4],
        };
        Ok(MicroBatchLoss {
            objective: Some(core),
            terms: Sam2StepLosses::of(Some(values), objects),
        })
    }
}

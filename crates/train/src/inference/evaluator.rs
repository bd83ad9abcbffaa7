//! Running a validation split through an inference mode into a confusion matrix.

use burn::tensor::{backend::Backend, Tensor, TensorData};
use segburn_data::{Batch, Loader};

use super::config::InferenceConfig;
use super::error::InferenceError;
use super::modes::predict_classes;
use super::net::SegmentationNet;
use crate::metric::ConfusionMatrix;

/// What the callback of [`Evaluator::run`] may fail with (e.g. a picture that cannot be written).
pub type CallbackError = Box<dyn std::error::Error + Send + Sync>;

/// One evaluated batch, as the callback of [`Evaluator::run`] sees it.
#[derive(Debug)]
pub struct EvalStep<'a> {
    /// Batches done so far, this one included.
    pub done: usize,
    /// Batches in the split.
    pub total: usize,
    /// The batch as the loader made it (normalised images, labels, names).
    pub batch: &'a Batch,
    /// Predicted class ids `[N, H, W]`, in the batch's order.
    pub predictions: &'a [u8],
}

/// Evaluates a model on a validation loader (batches at full resolution, no augmentation).
pub struct Evaluator<'m, B: Backend, M: SegmentationNet<B>> {
    model: &'m M,
    config: InferenceConfig,
    device: B::Device,
    num_classes: usize,
    ignore_index: i64,
}

impl<'m, B: Backend, M: SegmentationNet<B>> Evaluator<'m, B, M> {
    /// Checks `config` and prepares an evaluation of `model` (which has `num_classes` outputs);
    /// ground-truth pixels equal to `ignore_index` are not counted.
    pub fn new(
        model: &'m M,
        config: InferenceConfig,
        num_classes: usize,
        ignore_index: i64,
        device: B::Device,
    ) -> Result<Self, InferenceError> {
        config.check()?;
        if num_classes > usize::from(u8::MAX) {
            return Err(InferenceError::Config(format!(
                "{num_classes} classes do not fit 8-bit predictions"
            )));
        }
        Ok(Self {
            model,
            config,
            device,
            num_classes,
            ignore_index,
        })
    }

    /// The inference settings.
    pub fn config(&self) -> &InferenceConfig {
        &self.config
    }

    /// Predicted class ids `[N, H, W]` of one loader batch.
    pub fn predict_batch(&self, batch: &Batch) -> Result<Vec<u8>, InferenceError> {
        let images = Tensor::<B, 4>::from_data(
            TensorData::new(batch.images.clone(), batch.image_shape()),
            &self.device,
        );
        let classes = predict_classes(self.model, images, &self.config)?;
        // Class ids are below `num_classes` <= 255 by construction of the argmax.
        Ok(classes
            .into_data()
            .iter::<i64>()
            .map(|c| c.clamp(0, 255) as u8)
            .collect())
    }

    /// Evaluates every batch of `loader` (in dataset order) and returns the confusion matrix.
    /// `on_batch` sees each batch with its predictions; an error from it stops the run.
    pub fn run(
        &self,
        loader: &Loader,
        on_batch: &mut dyn FnMut(&EvalStep<'_>) -> Result<(), CallbackError>,
    ) -> Result<ConfusionMatrix, InferenceError> {
        let total = loader.batches_per_epoch();
        let mut matrix = ConfusionMatrix::new(self.num_classes, self.ignore_index);
        for (i, batch) in loader.epoch_iter(0, 0).enumerate() {
            let batch = batch?;
            let predictions = self.predict_batch(&batch)?;
            matrix.update(&predictions, &batch.labels)?;
            on_batch(&EvalStep {
                done: i + 1,
                total,
                batch: &batch,
                predictions: &predictions,
            })
            .map_err(InferenceError::Callback)?;
        }
        Ok(matrix)
    }
}

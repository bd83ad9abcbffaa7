//! The single conversion point from the loader's host buffers to Burn tensors.

use burn::tensor::{backend::Backend, Tensor, TensorData};
use segburn_data::Batch;

use crate::loss::{LossError, PixelTargets};

/// A batch on the device: images in the compute dtype, labels on the host (the losses check
/// them there anyway), edges as f32.
pub struct DeviceBatch<B: Backend> {
    pub images: Tensor<B, 4>,
    pub targets: PixelTargets,
    pub edges: Tensor<B, 3>,
}

impl<B: Backend> DeviceBatch<B> {
    /// Takes the batch by value: its image buffer becomes the tensor's data without a copy.
    pub fn upload(
        batch: Batch,
        num_classes: usize,
        ignore_index: i64,
        dtype: burn::tensor::FloatDType,
        device: &B::Device,
    ) -> Result<Self, LossError> {
        let image_shape = batch.image_shape();
        let label_shape = batch.label_shape();
        let images = Tensor::<B, 4>::from_data(TensorData::new(batch.images, image_shape), device)
            .cast(dtype);
        let labels: Vec<i64> = batch.labels.iter().map(|&l| l as i64).collect();
        let targets = PixelTargets::new(labels, label_shape, num_classes, ignore_index)?;
        let edges: Vec<f32> = batch.edges.iter().map(|&e| e as f32).collect();
        let edges = Tensor::from_data(TensorData::new(edges, label_shape), device);
        Ok(Self {
            images,
            targets,
            edges,
        })
    }
}

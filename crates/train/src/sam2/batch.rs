//! From an object batch (host buffers) to what the model and the loss read.

use burn::module::AutodiffModule;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{FloatDType, Int, Tensor, TensorData};
use segburn_data::objects::ObjectBatch;
use segburn_models::sam2::{BackboneFeatures, HighResFeatures, ImageFeatures, Sam2, Sam2Error};

use super::embeddings::read_embeddings;
use super::prompts::MaskView;
use crate::engine::TrainError;

/// How the images of a batch become features (e.g. [`Sam2::forward_image`], or
/// [`frozen_encoder_features`]).
pub type Encode<'a, B> = dyn Fn(Tensor<B, 4>) -> Result<ImageFeatures<B>, Sam2Error> + 'a;

/// The image features of every image of `batch`, in `dtype` (the compute precision; the
/// decoder then runs in it): from `encode` (fed `dtype` images), or from the cached
/// embedding files.
pub fn image_features<B: Backend>(
    model: &Sam2<B>,
    batch: &ObjectBatch,
    encode: &Encode<'_, B>,
    dtype: FloatDType,
    device: &B::Device,
) -> Result<ImageFeatures<B>, TrainError> {
    let features = match &batch.images {
        Some(images) => {
            if model.image_encoder.is_none() {
                return Err(TrainError::Config(
                    "the model has no image encoder (model.image_encoder: None): set \
                     data.embeddings to a folder of cached embeddings, or give the model an \
                     encoder"
                        .to_string(),
                ));
            }
            let shape = [batch.num_images(), 3, batch.size, batch.size];
            let images = Tensor::<B, 4>::from_data(TensorData::new(images.clone(), shape), device);
            encode(images.cast(dtype))?
        }
        None => {
            let encoder = &model.sam_prompt_encoder;
            read_embeddings(
                &batch.embeddings,
                encoder.embed_dim(),
                encoder.image_embedding_size(),
                model.sam_mask_decoder.conv_s0.is_some(),
                device,
            )?
            .cast(dtype)
        }
    };
    Ok(features)
}

/// The features of a frozen image encoder: the encoder runs on the inner (non-autodiff)
/// backend, so no graph is recorded behind it and its activations are freed as it goes; its
/// levels enter the graph as constants. The heads' part of the image path (`conv_s0`/`conv_s1`,
/// `no_mem_embed`) still runs with autodiff and trains.
pub fn frozen_encoder_features<B: AutodiffBackend>(
    model: &Sam2<B>,
    images: Tensor<B, 4>,
) -> Result<ImageFeatures<B>, Sam2Error> {
    let encoder = model
        .image_encoder
        .as_ref()
        .ok_or(Sam2Error::NoImageEncoder)?
        .valid();
    let levels = encoder.forward(images.inner())?;
    Ok(model.features_from_backbone(BackboneFeatures {
        stride4: Tensor::from_inner(levels.stride4),
        stride8: Tensor::from_inner(levels.stride8),
        stride16: Tensor::from_inner(levels.stride16),
    }))
}

/// The features of each object's image: `[K, …]` rows picked from the `[N, …]` image rows.
pub fn per_object<B: Backend>(
    features: &ImageFeatures<B>,
    object_image: &[usize],
) -> ImageFeatures<B> {
    let images = features.image_embed.dims()[0];
    if object_image.len() == images && object_image.iter().enumerate().all(|(i, &j)| i == j) {
        return features.clone();
    }
    let device = features.image_embed.device();
    let rows: Vec<i64> = object_image.iter().map(|&i| i as i64).collect();
    let index =
        Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [object_image.len()]), &device);
    ImageFeatures {
        image_embed: features.image_embed.clone().select(0, index.clone()),
        high_res: features.high_res.as_ref().map(|h| HighResFeatures {
            feat_s0: h.feat_s0.clone().select(0, index.clone()),
            feat_s1: h.feat_s1.clone().select(0, index.clone()),
        }),
    }
}

/// `[K, 1, S, S]` 0/1 targets.
pub fn targets<B: Backend>(batch: &ObjectBatch, device: &B::Device) -> Tensor<B, 4> {
    let values: Vec<f32> = batch.masks.iter().map(|&m| f32::from(m)).collect();
    let s = batch.size;
    Tensor::from_data(
        TensorData::new(values, [batch.num_objects(), 1, s, s]),
        device,
    )
}

/// The object masks as views for prompt sampling.
pub fn truth_views(batch: &ObjectBatch) -> Vec<MaskView<'_>> {
    let size = batch.size;
    batch
        .masks
        .chunks_exact(size * size)
        .map(|pixels| MaskView { size, pixels })
        .collect()
}

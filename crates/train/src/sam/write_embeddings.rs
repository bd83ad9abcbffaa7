//! Writing cached embeddings for a dataset with our image encoder, so a decoder can then train
//! (or be evaluated) with the encoder absent: `<embeddings>/<name>.safetensors` per image.

use std::path::{Path, PathBuf};

use burn::tensor::{backend::Backend, Tensor, TensorData};
use segburn_data::objects::{path_for_split, ObjectDataConfig, ObjectDataset};
use segburn_models::sam2::{import, Sam2};

use super::config::Sam2ModelConfig;
use super::embeddings::write_embedding;
use super::error::Sam2TrainError;
use crate::checkpoint::load_checkpoint;

/// What was written for one split.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingSummary {
    pub split: String,
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
}

/// The model whose encoder (and `conv_s0`/`conv_s1` projections) make the embeddings: from a
/// segburn checkpoint that has an encoder, or freshly initialised when `checkpoint` is `None`.
pub fn encoder_model<B: Backend>(
    model: &Sam2ModelConfig,
    checkpoint: Option<&Path>,
    device: &B::Device,
) -> Result<Sam2<B>, Sam2TrainError> {
    let mut config = model.clone();
    if config.image_encoder.is_none() {
        config.image_encoder = Sam2ModelConfig::default().image_encoder;
    }
    let fresh = config.sam2().init::<B>(device);
    let Some(path) = checkpoint else {
        return Ok(fresh);
    };
    let saved = load_checkpoint(path)?;
    if !saved
        .model
        .keys()
        .any(|k| k.starts_with("image_encoder.stem."))
    {
        return Err(Sam2TrainError::Config(format!(
            "{} has no image encoder (image_encoder.* keys): embeddings need the checkpoint of a \
             run trained end to end, e.g. configs/sam2_decoder.ron",
            path.display()
        )));
    }
    let (model, report) =
        import::load_sam2_tensors(fresh, &saved.model, false, &path.display().to_string())?;
    if !report.shape_mismatched.is_empty() {
        return Err(Sam2TrainError::Config(format!(
            "{} does not fit model.image_size / transformer_dim / image_encoder of this config:\n{report}",
            path.display()
        )));
    }
    Ok(model)
}

/// Writes the embedding of every image of each split to the folder `data.embeddings` names.
/// `progress(split, done, total)` is called after each file.
pub fn write_cached_embeddings<B: Backend>(
    model: &Sam2<B>,
    data: &ObjectDataConfig,
    splits: &[String],
    image_size: usize,
    device: &B::Device,
    source: &str,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<Vec<EmbeddingSummary>, Sam2TrainError> {
    let Some(target) = &data.embeddings else {
        return Err(Sam2TrainError::Config(
            "data.embeddings is not set: it names the folder the embeddings are written to"
                .to_string(),
        ));
    };
    // Read the images themselves, unflipped.
    let images_config = ObjectDataConfig {
        embeddings: None,
        flip: false,
        ..data.clone()
    };
    let mut summaries = Vec::new();
    for split in splits {
        let dataset = ObjectDataset::new(&images_config, split, image_size, 0)?;
        let dir = path_for_split(target, split);
        let mut bytes = 0;
        for index in 0..dataset.len() {
            let sample = dataset.load(index, false)?;
            let Some(pixels) = sample.image else {
                continue;
            };
            let image: Tensor<B, 4> = Tensor::from_data(
                TensorData::new(pixels, [1, 3, image_size, image_size]),
                device,
            );
            let features = model.forward_image(image)?;
            let file = dir.join(format!("{}.safetensors", sample.name));
            bytes += write_embedding(&file, &features, source)?;
            progress(split, index + 1, dataset.len());
        }
        summaries.push(EmbeddingSummary {
            split: split.clone(),
            dir,
            files: dataset.len(),
            bytes,
        });
    }
    Ok(summaries)
}

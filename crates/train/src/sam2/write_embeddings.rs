//! Writing cached embeddings for a dataset with our image encoder, so a decoder can then train
//! (or be evaluated) with the encoder absent: `<embeddings>/<name>.safetensors` per image.

use std::path::{Path, PathBuf};

use burn::tensor::{backend::Backend, Tensor, TensorData};
use segburn_data::objects::{path_for_split, ObjectDataConfig, ObjectDataset};
use segburn_models::sam2::{import, HieraSize, Sam2, Sam2Error};
use segburn_models::tensor_file::NamedTensors;

use super::config::Sam2ModelConfig;
use super::embeddings::write_embedding;
use super::encoder_config::{HieraTrunk, ImageEncoderChoice};
use crate::checkpoint::load_checkpoint;
use crate::engine::TrainError;

/// What was written for one split.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingSummary {
    pub split: String,
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
}

/// The model whose encoder (and `conv_s0`/`conv_s1` projections, and `no_mem_embed` with
/// Hiera) makes the embeddings: freshly initialised when `checkpoint` is `None`, else from a
/// segburn checkpoint that has an encoder or from an official SAM 2.1 checkpoint
/// (`sam2.1_hiera_*.pt`, loaded strictly).
///
/// When `model.image_encoder` is `None` (a cached-embeddings config), the encoder is our CNN
/// with default channels, or for a file with Hiera keys the official size that has its number
/// of blocks.
pub fn encoder_model<B: Backend>(
    model: &Sam2ModelConfig,
    checkpoint: Option<&Path>,
    device: &B::Device,
) -> Result<Sam2<B>, TrainError> {
    let mut config = model.clone();
    let Some(path) = checkpoint else {
        if config.image_encoder.is_none() {
            config.image_encoder = Sam2ModelConfig::default().image_encoder;
        }
        return Ok(config.sam2().init::<B>(device));
    };
    let name = path.display().to_string();
    let tensors = match load_checkpoint(path) {
        Ok(saved) => saved.model,
        Err(e) if e.may_be_other_weights() => {
            import::read_checkpoint(path).map_err(Sam2Error::from)?
        }
        Err(e) => return Err(e.into()),
    };
    if !tensors.keys().any(|k| k.starts_with("image_encoder.")) {
        return Err(TrainError::Config(format!(
            "{name} has no image encoder (image_encoder.* keys): embeddings need an official \
             SAM 2.1 checkpoint or the checkpoint of a run trained end to end, e.g. \
             configs/sam2_decoder.ron"
        )));
    }
    if config.image_encoder.is_none() && tensors.keys().any(|k| k.starts_with(TRUNK_BLOCKS)) {
        config.image_encoder = official_hiera_of(&tensors).ok_or_else(|| {
            TrainError::Config(format!(
                "{name}: its Hiera trunk is none of the official sizes; write it out in \
                 model.image_encoder (Hiera(size: Custom(...)))"
            ))
        })?;
    }
    let fresh = config.sam2().init::<B>(device);
    let strict = config.image_encoder.is_hiera();
    let (model, report) = import::load_sam2_tensors(fresh, &tensors, strict, &name)?;
    if !report.shape_mismatched.is_empty() {
        return Err(TrainError::Config(format!(
            "{name} does not fit model.image_size / transformer_dim / image_encoder of this config:\n{report}"
        )));
    }
    Ok(model)
}

const TRUNK_BLOCKS: &str = "image_encoder.trunk.blocks.";

/// The official Hiera size with as many trunk blocks as `tensors` has.
fn official_hiera_of(tensors: &NamedTensors) -> Option<ImageEncoderChoice> {
    let blocks = tensors
        .keys()
        .filter_map(|k| {
            k.strip_prefix(TRUNK_BLOCKS)?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .max()?
        + 1;
    [
        HieraSize::Tiny,
        HieraSize::Small,
        HieraSize::BasePlus,
        HieraSize::Large,
    ]
    .into_iter()
    .map(HieraTrunk::official)
    .find(|trunk| trunk.config().stages.iter().sum::<usize>() == blocks)
    .map(ImageEncoderChoice::hiera)
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
) -> Result<Vec<EmbeddingSummary>, TrainError> {
    let Some(target) = &data.embeddings else {
        return Err(TrainError::Config(
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

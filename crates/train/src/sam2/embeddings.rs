//! Cached image embeddings: one safetensors file per image with
//! `image_embed [C, h, w]`, `feat_s0 [C/8, 4h, 4w]` and `feat_s1 [C/4, 2h, 2w]` (the high-res
//! features already projected by `conv_s0`/`conv_s1`, as SAM2Base hands them to the decoder),
//! stored in f32. A leading batch dimension of 1 is accepted when reading.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::tensor::{backend::Backend, Tensor, TensorData};
use segburn_models::sam2::{HighResFeatures, ImageFeatures};
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};

use crate::engine::TrainError;

/// Tensor names in an embedding file.
pub const IMAGE_EMBED: &str = "image_embed";
pub const FEAT_S0: &str = "feat_s0";
pub const FEAT_S1: &str = "feat_s1";

/// Writes the features of one image (batch 1) to `path`; returns the bytes written.
pub fn write_embedding<B: Backend>(
    path: &Path,
    features: &ImageFeatures<B>,
    source: &str,
) -> Result<u64, TrainError> {
    let mut tensors = NamedTensors::new();
    let squeeze = |t: Tensor<B, 4>| -> TensorData {
        let [_, c, h, w] = t.dims();
        t.reshape([c, h, w]).into_data().convert::<f32>()
    };
    tensors.insert(
        IMAGE_EMBED.to_string(),
        squeeze(features.image_embed.clone()),
    );
    if let Some(high_res) = &features.high_res {
        tensors.insert(FEAT_S0.to_string(), squeeze(high_res.feat_s0.clone()));
        tensors.insert(FEAT_S1.to_string(), squeeze(high_res.feat_s1.clone()));
    }
    let metadata = HashMap::from([("source".to_string(), source.to_string())]);
    let bytes = serialize_safetensors(&tensors, Some(metadata), path)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| TrainError::Log {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, &bytes).map_err(|source| TrainError::Log {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(bytes.len() as u64)
}

/// Reads the embeddings of a batch of images: `[N, C, h, w]` and the high-res features, each
/// checked against the model's `channels` and embedding grid `(h, w)`.
pub fn read_embeddings<B: Backend>(
    paths: &[PathBuf],
    channels: usize,
    grid: [usize; 2],
    high_res: bool,
    device: &B::Device,
) -> Result<ImageFeatures<B>, TrainError> {
    let [h, w] = grid;
    let mut embeds = Vec::with_capacity(paths.len());
    let mut s0 = Vec::with_capacity(paths.len());
    let mut s1 = Vec::with_capacity(paths.len());
    for path in paths {
        let tensors = read_safetensors(path)?;
        embeds.push(take(&tensors, path, IMAGE_EMBED, [channels, h, w], device)?);
        if high_res {
            s0.push(take(
                &tensors,
                path,
                FEAT_S0,
                [channels / 8, 4 * h, 4 * w],
                device,
            )?);
            s1.push(take(
                &tensors,
                path,
                FEAT_S1,
                [channels / 4, 2 * h, 2 * w],
                device,
            )?);
        }
    }
    Ok(ImageFeatures {
        image_embed: Tensor::cat(embeds, 0),
        high_res: high_res.then(|| HighResFeatures {
            feat_s0: Tensor::cat(s0, 0),
            feat_s1: Tensor::cat(s1, 0),
        }),
    })
}

/// `key` of an embedding file as `[1, C, H, W]`.
fn take<B: Backend>(
    tensors: &NamedTensors,
    path: &Path,
    key: &str,
    expected: [usize; 3],
    device: &B::Device,
) -> Result<Tensor<B, 4>, TrainError> {
    let problem = |problem: String| TrainError::Embedding {
        path: path.to_path_buf(),
        key: key.to_string(),
        problem,
    };
    let data = tensors
        .get(key)
        .ok_or_else(|| problem("is missing (was this file written for SAM2?)".to_string()))?;
    let shape = &data.shape;
    let matches = shape.as_slice() == expected
        || shape.as_slice() == [1, expected[0], expected[1], expected[2]];
    if !matches {
        return Err(problem(format!(
            "has shape {shape:?}, the model needs {expected:?} (was it written for another \
             model.image_size or transformer_dim?)"
        )));
    }
    if !data.dtype.is_float() {
        return Err(problem(format!(
            "has dtype {:?}, expected a float type",
            data.dtype
        )));
    }
    let data = data.clone().convert::<f32>();
    let tensor: Tensor<B, 3> = Tensor::from_data(
        TensorData::new(
            data.to_vec::<f32>()
                .map_err(|e| problem(format!("{e:?}")))?,
            expected,
        ),
        device,
    );
    Ok(tensor.unsqueeze())
}

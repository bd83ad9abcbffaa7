//! The inference modes: whole image, sliding window, multi-scale and flip.
//!
//! Order of operations for each scale `s` (the official `multi_scale_inference`, with the
//! sliding window available at every scale): resize the input to `s`, predict it whole or by
//! windows (and its mirror image, if flipping), upsample to the scaled size, resize back to the
//! input size, and average over the scales. Everything outside the network runs in f32.

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};
use segburn_models::nn::{resize_bilinear, resize_bilinear_align_corners};

use super::config::{InferenceConfig, InferenceMode};
use super::error::InferenceError;
use super::net::SegmentationNet;
use super::windows::{padded_to_multiple, windows};
use crate::compute_threads::on_compute_pool;

/// Class scores `[N, K, H, W]` (f32) of normalised images `[N, 3, H, W]` (f32), any `H × W`.
///
/// Computed on a compute-pool thread (`on_compute_pool`): every op then hands work to the
/// pool without waiting for a sleeping thread to wake.
pub fn predict_logits<B: Backend, M: SegmentationNet<B>>(
    model: &M,
    images: Tensor<B, 4>,
    config: &InferenceConfig,
) -> Result<Tensor<B, 4>, InferenceError> {
    on_compute_pool(|| logits_here(model, images, config))
}

/// [`predict_logits`] on the calling thread.
fn logits_here<B: Backend, M: SegmentationNet<B>>(
    model: &M,
    images: Tensor<B, 4>,
    config: &InferenceConfig,
) -> Result<Tensor<B, 4>, InferenceError> {
    config.check()?;
    let [_, _, height, width] = images.dims();
    if height == 0 || width == 0 {
        return Err(InferenceError::Config(format!(
            "empty image {height}x{width}"
        )));
    }
    let mut sum: Option<Tensor<B, 4>> = None;
    for &scale in &config.scales {
        let logits = if scale == 1.0 {
            flip_averaged(model, images.clone(), config)?
        } else {
            let scaled = [scaled_side(height, scale), scaled_side(width, scale)];
            let input = resize_bilinear(images.clone(), scaled);
            let logits = flip_averaged(model, input, config)?;
            resize_bilinear_align_corners(logits, [height, width])
        };
        sum = Some(match sum {
            None => logits,
            Some(total) => total + logits,
        });
    }
    let sum = sum.ok_or_else(|| InferenceError::Config("no scales".into()))?;
    Ok(if config.scales.len() > 1 {
        sum / config.scales.len() as f64
    } else {
        sum
    })
}

/// The argmax of [`predict_logits`]: class ids `[N, H, W]`.
pub fn predict_classes<B: Backend, M: SegmentationNet<B>>(
    model: &M,
    images: Tensor<B, 4>,
    config: &InferenceConfig,
) -> Result<Tensor<B, 3, Int>, InferenceError> {
    let logits = predict_logits(model, images, config)?;
    let [n, _, h, w] = logits.dims();
    Ok(logits.argmax(1).reshape([n, h, w]))
}

/// `side × scale`, rounded half up as the official `int(x * scale + 0.5)`, at least 1 pixel.
fn scaled_side(side: usize, scale: f64) -> usize {
    ((side as f64 * scale + 0.5) as usize).max(1)
}

fn flip_averaged<B: Backend, M: SegmentationNet<B>>(
    model: &M,
    images: Tensor<B, 4>,
    config: &InferenceConfig,
) -> Result<Tensor<B, 4>, InferenceError> {
    let logits = windowed(model, images.clone(), config)?;
    if !config.flip {
        return Ok(logits);
    }
    let mirrored = windowed(model, images.flip([3]), config)?.flip([3]);
    Ok((logits + mirrored) / 2.0)
}

fn windowed<B: Backend, M: SegmentationNet<B>>(
    model: &M,
    images: Tensor<B, 4>,
    config: &InferenceConfig,
) -> Result<Tensor<B, 4>, InferenceError> {
    match &config.mode {
        InferenceMode::Whole => whole(model, images, config),
        InferenceMode::Slide { crop, stride } => slide(model, images, *crop, *stride, config),
    }
}

/// One pass over the whole input: pad right and bottom to the network's multiple (zeros, i.e.
/// the mean colour after normalisation), upsample the logits to the padded size with
/// `align_corners = true` (the official evaluation), and crop the padding off.
fn whole<B: Backend, M: SegmentationNet<B>>(
    model: &M,
    images: Tensor<B, 4>,
    config: &InferenceConfig,
) -> Result<Tensor<B, 4>, InferenceError> {
    let [n, _, height, width] = images.dims();
    let multiple = model.input_multiple();
    let (padded_h, padded_w) = (
        padded_to_multiple(height, multiple),
        padded_to_multiple(width, multiple),
    );
    let padded = (padded_h, padded_w) != (height, width);
    let input = if padded {
        images.pad([(0, padded_h - height), (0, padded_w - width)], 0.0)
    } else {
        images
    };
    let logits = model
        .logits(input.cast(config.precision.compute_dtype()))?
        .cast(burn::tensor::FloatDType::F32);
    let logits = resize_bilinear_align_corners(logits, [padded_h, padded_w]);
    Ok(if padded {
        let classes = logits.dims()[1];
        logits.slice([0..n, 0..classes, 0..height, 0..width])
    } else {
        logits
    })
}

/// Windows of `crop` every `stride` (mmsegmentation's placement), each predicted whole; the
/// logits of overlapping windows are averaged.
fn slide<B: Backend, M: SegmentationNet<B>>(
    model: &M,
    images: Tensor<B, 4>,
    crop: [usize; 2],
    stride: [usize; 2],
    config: &InferenceConfig,
) -> Result<Tensor<B, 4>, InferenceError> {
    let [n, channels, height, width] = images.dims();
    let device = images.device();
    let placed = windows([height, width], crop, stride);
    let mut counts = vec![0f32; height * width];
    let mut sum: Option<Tensor<B, 4>> = None;
    for window in &placed {
        let rows = window.top..window.top + window.height;
        let columns = window.left..window.left + window.width;
        let part = images
            .clone()
            .slice([0..n, 0..channels, rows.clone(), columns.clone()]);
        let logits = whole(model, part, config)?;
        let classes = logits.dims()[1];
        let total = sum.unwrap_or_else(|| Tensor::zeros([n, classes, height, width], &device));
        let ranges = [0..n, 0..classes, rows.clone(), columns.clone()];
        let updated = total.clone().slice(ranges.clone()) + logits;
        sum = Some(total.slice_assign(ranges, updated));
        for y in rows {
            for count in &mut counts[y * width + columns.start..y * width + columns.end] {
                *count += 1.0;
            }
        }
    }
    let sum = sum.ok_or_else(|| InferenceError::Config("no sliding window fits".into()))?;
    let counts = Tensor::<B, 4>::from_data(TensorData::new(counts, [1, 1, height, width]), &device);
    Ok(sum / counts)
}

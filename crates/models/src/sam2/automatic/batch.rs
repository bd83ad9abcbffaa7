//! One batch of clicks through the predictor, and the per-mask filters that follow
//! (upstream's `_process_batch`): predicted IoU, stability score, binarisation, boxes, and the
//! crop-edge rule.

use burn::tensor::{backend::Backend, Int, Tensor};

use super::clicks::predict_clicks;
use super::config::AutomaticMaskGeneratorConfig;
use super::crops::{is_near_crop_edge, CropBox};
use super::mask::BinaryMask;
use super::stability::stability_scores;
use crate::sam2::{Sam2, Sam2Error, Sam2ImagePredictor};

/// A mask that passed the batch filters, still in its crop's frame.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    /// The binarised mask at the crop's size.
    pub mask: BinaryMask,
    /// `[x0, y0, x1, y1]` with inclusive ends, crop frame.
    pub bbox: [usize; 4],
    /// The decoder's IoU estimate.
    pub predicted_iou: f32,
    /// The click that produced the mask, crop pixels.
    pub point: [f32; 2],
    /// See [`stability_scores`].
    pub stability_score: f32,
}

/// Runs `points` (crop pixels) through `predictor` (set to the crop, with `model`) and returns
/// the masks that pass the filters, in upstream's order: click by click, each click's masks in
/// the decoder's order. `image_size` is the whole image's `[H, W]`.
pub(super) fn process_batch<B: Backend>(
    model: &Sam2<B>,
    predictor: &Sam2ImagePredictor<'_, B>,
    points: &[[f32; 2]],
    crop: CropBox,
    image_size: [usize; 2],
    config: &AutomaticMaskGeneratorConfig,
) -> Result<Vec<Candidate>, Sam2Error> {
    let crop_size = [crop[3] - crop[1], crop[2] - crop[0]];
    let cleanup = (config.mask_threshold, config.min_mask_region_area);
    let prediction = predict_clicks(
        model,
        predictor,
        points,
        None,
        config.multimask_output,
        crop_size,
        cleanup,
    )?;
    let [clicks, per_click, height, width] = prediction.masks.dims();
    let count = clicks * per_click;
    let mut logits = prediction.masks.reshape([count, height, width]);
    let mut ious = to_f32(prediction.iou_pred.reshape([count]));
    // upstream's `repeat_interleave`: each click once per mask it produced.
    let mask_points: Vec<[f32; 2]> = points
        .iter()
        .flat_map(|&p| std::iter::repeat_n(p, per_click))
        .collect();

    if config.use_m2m {
        let low_res = prediction.low_res_masks;
        let [_, _, low_height, low_width] = low_res.dims();
        let low_res = low_res.reshape([count, 1, low_height, low_width]);
        (logits, ious) =
            refine_with_own_masks(model, predictor, &mask_points, low_res, crop_size, config)?;
    }

    // Indices into this batch's masks that are still kept.
    let mut kept: Vec<usize> = (0..count).collect();
    // Thresholds compare in f32, like a float32 tensor against a Python float.
    if config.pred_iou_thresh > 0.0 {
        kept.retain(|&i| ious[i] > config.pred_iou_thresh as f32);
    }
    let kept_logits = select(&logits, &kept);
    let stability = match &kept_logits {
        Some(kept_logits) => stability_scores(
            kept_logits.clone(),
            config.mask_threshold,
            config.stability_score_offset,
        ),
        None => Vec::new(),
    };
    let mut candidates = Vec::new();
    for (rank, &index) in kept.iter().enumerate() {
        let stability_score = stability[rank];
        // `>=` is false for NaN (an empty wide mask), which upstream drops too.
        let stable = stability_score >= config.stability_score_thresh as f32;
        if config.stability_score_thresh > 0.0 && !stable {
            continue;
        }
        let mask = binarize(logits.clone(), index, config.mask_threshold)?;
        let bbox = mask.bounding_box();
        if is_near_crop_edge(bbox, crop, image_size) {
            continue;
        }
        candidates.push(Candidate {
            mask,
            bbox,
            predicted_iou: ious[index],
            point: mask_points[index],
            stability_score,
        });
    }
    Ok(candidates)
}

/// upstream's `refine_with_m2m`: every mask is predicted again from its click and its own
/// (clamped) low-resolution logits as the mask prompt, one mask per click, in batches of
/// `points_per_batch`. Returns the new `[N, H, W]` logits and IoUs.
fn refine_with_own_masks<B: Backend>(
    model: &Sam2<B>,
    predictor: &Sam2ImagePredictor<'_, B>,
    points: &[[f32; 2]],
    low_res: Tensor<B, 4>,
    crop_size: [usize; 2],
    config: &AutomaticMaskGeneratorConfig,
) -> Result<(Tensor<B, 3>, Vec<f32>), Sam2Error> {
    let mut logits = Vec::new();
    let mut ious = Vec::new();
    for start in (0..points.len()).step_by(config.points_per_batch) {
        let end = (start + config.points_per_batch).min(points.len());
        let mask_input = low_res.clone().slice(start..end);
        let prediction = predict_clicks(
            model,
            predictor,
            &points[start..end],
            Some(mask_input),
            false,
            crop_size,
            (config.mask_threshold, config.min_mask_region_area),
        )?;
        let [clicks, _, height, width] = prediction.masks.dims();
        logits.push(prediction.masks.reshape([clicks, height, width]));
        ious.extend(to_f32(prediction.iou_pred.reshape([clicks])));
    }
    Ok((Tensor::cat(logits, 0), ious))
}

/// The rows `indices` of `[N, H, W]` logits; `None` when there are none.
fn select<B: Backend>(logits: &Tensor<B, 3>, indices: &[usize]) -> Option<Tensor<B, 3>> {
    if indices.is_empty() {
        return None;
    }
    let indices: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
    let device = logits.device();
    let indices = Tensor::<B, 1, Int>::from_ints(indices.as_slice(), &device);
    Some(logits.clone().select(0, indices))
}

/// Mask `index` of `[N, H, W]` logits, set where the logit is strictly above `threshold`.
/// One mask at a time so only `H · W` bytes come to the CPU at once.
fn binarize<B: Backend>(
    logits: Tensor<B, 3>,
    index: usize,
    threshold: f64,
) -> Result<BinaryMask, Sam2Error> {
    let [_, height, width] = logits.dims();
    let pixels = logits
        .slice(index..index + 1)
        .greater_elem(threshold as f32)
        .int()
        .into_data()
        .convert::<u8>()
        .into_vec::<u8>()
        .map_err(|e| Sam2Error::shape(format!("reading mask {index} back: {e:?}")))?;
    let data = pixels.into_iter().map(|p| p != 0).collect();
    BinaryMask::new(height, width, data)
        .ok_or_else(|| Sam2Error::shape(format!("mask {index} is not {height}×{width}")))
}

/// A 1-D tensor's values as f32 whatever the model's dtype.
fn to_f32<B: Backend>(values: Tensor<B, 1>) -> Vec<f32> {
    values
        .into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .expect("the data was converted to f32 just above")
}

//! Single-click prompts through the predictor, as upstream's `_predict(..., return_logits=True)`
//! with the generator's predictor: when `min_mask_region_area > 0` the low-resolution logits
//! are cleaned of small holes and islands before they are upscaled.

use burn::tensor::{backend::Backend, Tensor, TensorData};

use super::regions::remove_small_regions;
use crate::sam2::{upscale_mask_logits, PromptSet, Prompts, Sam2, Sam2Error, Sam2ImagePredictor};

/// What a batch of clicks gives: `[P, M, H, W]` logits at the crop's size, `[P, M]` predicted
/// IoUs and `[P, M, S/4, S/4]` low-resolution logits clamped to ±32 (not cleaned, as upstream).
pub(super) struct ClickPrediction<B: Backend> {
    pub masks: Tensor<B, 4>,
    pub iou_pred: Tensor<B, 2>,
    pub low_res_masks: Tensor<B, 4>,
}

/// One prompt set per click, each a single foreground point.
pub(super) fn click_sets(points: &[[f32; 2]]) -> Vec<PromptSet> {
    points
        .iter()
        .map(|&point| PromptSet {
            points: vec![point],
            labels: vec![1],
            bbox: None,
        })
        .collect()
}

/// Predicts the masks of `points` (crop pixels, one object each) on the crop `predictor` holds
/// (`crop_size` = its `[H, W]`). `min_region_area` > 0 cleans the low-resolution logits first
/// (see [`remove_small_regions`]); the predictor does not expose the unclamped logits, so that
/// path runs the prompt encoder and decoder of `model` directly, as the predictor would.
pub(super) fn predict_clicks<B: Backend>(
    model: &Sam2<B>,
    predictor: &Sam2ImagePredictor<'_, B>,
    points: &[[f32; 2]],
    mask_input: Option<Tensor<B, 4>>,
    multimask_output: bool,
    crop_size: [usize; 2],
    (mask_threshold, min_region_area): (f64, usize),
) -> Result<ClickPrediction<B>, Sam2Error> {
    let sets = click_sets(points);
    if min_region_area == 0 {
        let prediction = predictor.predict(&sets, mask_input, multimask_output)?;
        return Ok(ClickPrediction {
            masks: prediction.masks,
            iou_pred: prediction.iou_pred,
            low_res_masks: prediction.low_res_masks,
        });
    }
    let prompts = Prompts {
        // `Option::from` takes the predictor's point prompts whether they come bare or as an
        // option (they are always present here: every set has its click).
        points: Option::from(predictor.point_prompts(&sets)?),
        boxes: None,
        masks: mask_input,
    };
    let input = model.decoder_input(predictor.features(), prompts)?;
    let output = model
        .sam_mask_decoder
        .forward_inference(input, multimask_output)?;
    let low_res = output.masks;
    let shape = low_res.dims();
    let [_, _, height, width] = shape;
    let (device, dtype) = (low_res.device(), low_res.dtype());
    let mut values = low_res
        .clone()
        .into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .map_err(|e| Sam2Error::shape(format!("reading the low-resolution masks: {e:?}")))?;
    remove_small_regions(
        &mut values,
        [height, width],
        mask_threshold as f32,
        min_region_area,
    );
    let cleaned = Tensor::from_data(TensorData::new(values, shape), (&device, dtype));
    Ok(ClickPrediction {
        masks: upscale_mask_logits(cleaned, crop_size),
        iou_pred: output.iou_pred,
        low_res_masks: low_res.clamp(-32.0, 32.0),
    })
}

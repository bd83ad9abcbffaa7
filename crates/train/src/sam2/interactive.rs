//! The interactive prompting loop of SAM2 training (`_iter_correct_pt_sampling`): the first
//! prompt (clicks, a box, or the ground-truth mask alone), then correction clicks, each step
//! feeding the previous step's best low-res logits back as the mask prompt — not detached, as
//! upstream, so gradients run through the chain.
//!
//! Every step's multimask outputs (upsampled to the input size), IoU predictions and object
//! scores are kept: the loss supervises all steps and sums them.

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};
use segburn_models::sam2::preprocess::resize_planes;
use segburn_models::sam2::{
    upscale_mask_logits, ImageFeatures, PointPrompts, Prompts, Sam2, Sam2Error,
};

use super::center_click::center_click;
use super::prompts::{
    box_clicks, tight_box, whole_image_box, Click, FirstPrompt, MaskView, TrainingPrompts,
};
use crate::loss::sam::SamPrediction;

/// The prompt encoder's point tensors of `objects` (the clicks of each object, the same number
/// for every object): coordinates `[objects, count, 2]` and labels `[objects, count]`.
pub fn point_prompts<B: Backend>(
    objects: &[Vec<Click>],
    device: &B::Device,
) -> Result<PointPrompts<B>, Sam2Error> {
    let count = objects.first().map_or(0, Vec::len);
    if objects.iter().any(|p| p.len() != count) {
        return Err(Sam2Error::Prompt(
            "every object of a batch needs the same number of prompt points".to_string(),
        ));
    }
    let clicks = || objects.iter().flatten();
    let coords: Vec<f32> = clicks().flat_map(|c| [c.x, c.y]).collect();
    let labels: Vec<i64> = clicks().map(|c| i64::from(c.label)).collect();
    let objects = objects.len();
    Ok(PointPrompts {
        coords: Tensor::from_data(TensorData::new(coords, [objects, count, 2]), device),
        labels: Tensor::<B, 2, Int>::from_data(TensorData::new(labels, [objects, count]), device),
    })
}

/// SAM2Base's logit for "no object" (`NO_OBJ_SCORE`).
const NO_OBJECT_LOGIT: f32 = -1024.0;

/// Where prompts come from: simulated (training) or deterministic (evaluation).
pub trait PromptPolicy {
    /// The first prompt of every object.
    fn first(&mut self, truths: &[MaskView<'_>]) -> FirstPrompt;
    /// One more click per object, given the current predictions.
    fn correction(&mut self, truths: &[MaskView<'_>], predictions: &[MaskView<'_>]) -> Vec<Click>;
}

impl PromptPolicy for TrainingPrompts {
    fn first(&mut self, truths: &[MaskView<'_>]) -> FirstPrompt {
        TrainingPrompts::first(self, truths)
    }

    fn correction(&mut self, truths: &[MaskView<'_>], predictions: &[MaskView<'_>]) -> Vec<Click> {
        TrainingPrompts::correction(self, truths, predictions)
    }
}

/// How an evaluation starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalStart {
    /// One click at the object's centre (the maximum of its distance transform).
    Click,
    /// The tight box, without noise.
    Box,
}

/// The evaluation protocol: a deterministic start, then clicks at the centre of the larger
/// error (SAM2's `sample_one_point_from_error_center`).
#[derive(Debug, Clone, Copy)]
pub struct EvalPrompts(pub EvalStart);

impl PromptPolicy for EvalPrompts {
    fn first(&mut self, truths: &[MaskView<'_>]) -> FirstPrompt {
        let points = truths
            .iter()
            .map(|truth| match self.0 {
                EvalStart::Click => vec![center_click(*truth, None)],
                EvalStart::Box => {
                    box_clicks(tight_box(*truth).unwrap_or_else(|| whole_image_box(truth.size)))
                        .to_vec()
                }
            })
            .collect();
        FirstPrompt::Points(points)
    }

    fn correction(&mut self, truths: &[MaskView<'_>], predictions: &[MaskView<'_>]) -> Vec<Click> {
        truths
            .iter()
            .zip(predictions)
            .map(|(truth, prediction)| center_click(*truth, Some(*prediction)))
            .collect()
    }
}

/// What the loop produced.
#[derive(Debug, Clone)]
pub struct InteractiveOutput<B: Backend> {
    /// One prediction per step, masks at the input size `[K, M, S, S]`.
    pub steps: Vec<SamPrediction<B>>,
    /// Per step, the best mask of every object thresholded at 0: `K · S · S` values 0/1.
    pub binary: Vec<Vec<u8>>,
}

/// Runs the first prompt and `corrections` correction steps for `K` objects.
///
/// `features` has batch 1 or `K`; `truths` are the `S × S` object masks.
pub fn interactive_steps<B: Backend>(
    model: &Sam2<B>,
    features: &ImageFeatures<B>,
    truths: &[MaskView<'_>],
    policy: &mut dyn PromptPolicy,
    corrections: usize,
    gate_by_object_score: bool,
) -> Result<InteractiveOutput<B>, Sam2Error> {
    let device = features.image_embed.device();
    let objects = truths.len();
    let size = model.sam_prompt_encoder.input_image_size()[0];
    let (mut points, mut mask_input) = match policy.first(truths) {
        FirstPrompt::Points(points) => (points, None),
        FirstPrompt::TruthMask => {
            let mask_size = model.sam_prompt_encoder.mask_input_size();
            (
                vec![Vec::new(); objects],
                Some(truth_mask_prompt(truths, mask_size, &device)),
            )
        }
    };
    let mut steps = Vec::with_capacity(corrections + 1);
    let mut binary = Vec::with_capacity(corrections + 1);
    for step in 0..=corrections {
        let count = points.first().map_or(0, Vec::len);
        let prompts = Prompts {
            // A mask alone has no point tensor (as the official predictor's mask-only prompt).
            points: (count > 0)
                .then(|| point_prompts(&points, &device))
                .transpose()?,
            boxes: None,
            masks: mask_input.take(),
        };
        // SAM2: several masks while the prompt is ambiguous (at most one point).
        let multimask = count <= 1;
        let output = model.forward_heads(features, prompts, multimask)?;
        // Upsampling, the next step's mask prompt, the clicks and the losses work in f32,
        // whatever precision the decoder computed in.
        let f32 = burn::tensor::FloatDType::F32;
        let iou_pred = output.iou_pred.cast(f32);
        let object_score_logits = output.object_score_logits.cast(f32);
        let mut low_res = output.masks.cast(f32);
        let [_, masks, low_h, low_w] = low_res.dims();
        if gate_by_object_score {
            let absent = object_score_logits
                .clone()
                .lower_equal_elem(0.0)
                .reshape([objects, 1, 1, 1])
                .expand([objects, masks, low_h, low_w]);
            low_res = low_res.mask_fill(absent, NO_OBJECT_LOGIT);
        }
        let high_res = upscale_mask_logits(low_res.clone(), [size, size]);
        let (low_best, high_best) = if masks > 1 {
            let best = iou_pred.clone().argmax(1).reshape([objects, 1, 1, 1]);
            (
                low_res.gather(1, best.clone().expand([objects, 1, low_h, low_w])),
                high_res
                    .clone()
                    .gather(1, best.expand([objects, 1, size, size])),
            )
        } else {
            (low_res, high_res.clone())
        };
        let predicted: Vec<u8> = high_best
            .greater_elem(0.0)
            .float()
            .into_data()
            .iter::<f32>()
            .map(|v| u8::from(v > 0.5))
            .collect();
        steps.push(SamPrediction {
            masks: high_res,
            iou_pred,
            object_score_logits,
        });
        if step < corrections {
            let views: Vec<MaskView<'_>> = predicted
                .chunks_exact(size * size)
                .map(|pixels| MaskView { size, pixels })
                .collect();
            let clicks = policy.correction(truths, &views);
            for (object_points, click) in points.iter_mut().zip(clicks) {
                object_points.push(click);
            }
            mask_input = Some(low_best);
        }
        binary.push(predicted);
    }
    Ok(InteractiveOutput { steps, binary })
}

/// The objects' ground-truth masks as a mask prompt `[K, 1, h, w]` of values in [0, 1]: each
/// `S × S` mask shrunk to the prompt encoder's `h × w` with the antialiased bilinear filter,
/// as SAM2Base does with a mask input (`_forward_sam_heads`). Host data, made in f32; the
/// prompt encoder casts it to the model's dtype.
pub fn truth_mask_prompt<B: Backend>(
    truths: &[MaskView<'_>],
    [h, w]: [usize; 2],
    device: &B::Device,
) -> Tensor<B, 4> {
    let mut values = Vec::with_capacity(truths.len() * h * w);
    for truth in truths {
        let plane: Vec<f64> = truth
            .pixels
            .iter()
            .map(|&p| f64::from(u8::from(p != 0)))
            .collect();
        let shrunk = resize_planes(&plane, [1, truth.size, truth.size], [h, w]);
        values.extend(shrunk.iter().map(|&v| v as f32));
    }
    Tensor::from_data(TensorData::new(values, [truths.len(), 1, h, w]), device)
}

/// Intersection over union of two binary masks (1 when both are empty).
pub fn mask_iou(a: &[u8], b: &[u8]) -> f64 {
    let (mut intersection, mut union) = (0usize, 0usize);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x != 0, y != 0);
        intersection += usize::from(x && y);
        union += usize::from(x || y);
    }
    if union == 0 {
        1.0
    } else {
        intersection as f64 / union as f64
    }
}

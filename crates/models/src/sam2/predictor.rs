//! `SAM2ImagePredictor`: one image in, masks for any number of prompt sets out.
//!
//! [`Sam2ImagePredictor::set_image`] preprocesses the image ([`super::preprocess`]) and runs the
//! encoder once; [`Sam2ImagePredictor::predict`] maps prompts from image pixels to the model
//! frame, runs the prompt encoder and the decoder (with the dynamic multimask fallback when a
//! single mask is asked for), and returns the masks at the image's own size. As upstream, the
//! low-resolution logits come back clamped to ±32 and no object-score gating is applied.

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};

use super::preprocess::preprocess_rgb;
use super::{upscale_mask_logits, ImageFeatures, PointPrompts, Prompts, Sam2, Sam2Error};

/// The prompts of one object, in the original image's pixels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptSet {
    /// Clicks `(x, y)`.
    pub points: Vec<[f32; 2]>,
    /// One label per click: 1 foreground, 0 background.
    pub labels: Vec<i64>,
    /// A box `(x0, y0, x1, y1)`.
    pub bbox: Option<[f32; 4]>,
}

/// What [`Sam2ImagePredictor::predict`] returns for `P` prompt sets and `M` masks each.
#[derive(Debug, Clone)]
pub struct ImagePrediction<B: Backend> {
    /// `[P, M, H, W]` mask logits at the original image size (a mask is `logit > 0`).
    pub masks: Tensor<B, 4>,
    /// `[P, M]` predicted IoU of each mask.
    pub iou_pred: Tensor<B, 2>,
    /// `[P, M, S/4, S/4]` low-resolution logits, clamped to ±32 (a mask prompt for the next
    /// call).
    pub low_res_masks: Tensor<B, 4>,
    /// `[P, 1]` object-score logits (upstream's predictor discards them).
    pub object_score_logits: Tensor<B, 2>,
}

/// A model with one image's features, ready for prompts.
pub struct Sam2ImagePredictor<'m, B: Backend> {
    model: &'m Sam2<B>,
    features: ImageFeatures<B>,
    original_size: [usize; 2],
}

impl<'m, B: Backend> Sam2ImagePredictor<'m, B> {
    /// Encodes an RGB image (`height × width × 3` bytes, row-major) of any size: it is resized
    /// (square, antialiased) to the model's input size and normalised first.
    pub fn set_image(
        model: &'m Sam2<B>,
        rgb: &[u8],
        size: [usize; 2],
        device: &B::Device,
    ) -> Result<Self, Sam2Error> {
        let input_size = model.sam_prompt_encoder.input_image_size();
        // The encoder computes in its input's dtype, so the image comes in the model's (an f64
        // model would otherwise run its encoder in f32).
        let dtype = model.sam_prompt_encoder.dtype();
        let image = preprocess_rgb::<B>(rgb, size, input_size, dtype, device)?;
        Self::from_input(model, image, size)
    }

    /// Like [`Self::set_image`] with an already preprocessed `[1, 3, S, S]` input (in the
    /// model's dtype); `original_size` is the image's `[H, W]`.
    pub fn from_input(
        model: &'m Sam2<B>,
        image: Tensor<B, 4>,
        original_size: [usize; 2],
    ) -> Result<Self, Sam2Error> {
        let features = model.forward_image(image)?;
        Ok(Self {
            model,
            features,
            original_size,
        })
    }

    /// The image's features (embedding with `no_mem_embed`, projected high-res levels).
    pub fn features(&self) -> &ImageFeatures<B> {
        &self.features
    }

    /// Maps `(x, y)` from original pixels to the model frame, in f32 as upstream
    /// (`x / W · S`, `y / H · S`; the half-pixel shift is the prompt encoder's).
    fn to_model_frame(&self, [x, y]: [f32; 2]) -> [f32; 2] {
        let [h, w] = self.original_size;
        let [sh, sw] = self.model.sam_prompt_encoder.input_image_size();
        [x / w as f32 * sw as f32, y / h as f32 * sh as f32]
    }

    /// The model's point prompts for `sets`: box corners (labels 2, 3) first, then the clicks.
    /// Every set needs points or a box here; [`Self::predict`] also takes sets without either
    /// when a mask prompt is given.
    pub fn point_prompts(&self, sets: &[PromptSet]) -> Result<PointPrompts<B>, Sam2Error> {
        self.optional_point_prompts(sets)?.ok_or_else(|| {
            Sam2Error::prompt("prompt set 0 has neither points nor a box (nor a mask prompt)")
        })
    }

    /// [`Self::point_prompts`], or `None` when no set has points or a box (a mask prompt
    /// alone: upstream then passes `points=None` and the prompt encoder has no sparse token).
    fn optional_point_prompts(
        &self,
        sets: &[PromptSet],
    ) -> Result<Option<PointPrompts<B>>, Sam2Error> {
        let first = sets
            .first()
            .ok_or_else(|| Sam2Error::prompt("no prompt set given"))?;
        let count = first.points.len();
        let has_box = first.bbox.is_some();
        let mut coords = Vec::new();
        let mut labels = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            if set.points.len() != set.labels.len() {
                return Err(Sam2Error::prompt(format!(
                    "prompt set {i} has {} points but {} labels",
                    set.points.len(),
                    set.labels.len()
                )));
            }
            if set.points.len() != count || set.bbox.is_some() != has_box {
                return Err(Sam2Error::prompt(format!(
                    "prompt sets are predicted together, so they need the same number of points \
                     and all or none a box; set {i} differs from set 0"
                )));
            }
            if let Some([x0, y0, x1, y1]) = set.bbox {
                coords.extend(self.to_model_frame([x0, y0]));
                coords.extend(self.to_model_frame([x1, y1]));
                labels.extend([2, 3]);
            }
            for (point, label) in set.points.iter().zip(&set.labels) {
                coords.extend(self.to_model_frame(*point));
                labels.push(*label);
            }
        }
        let per_set = count + if has_box { 2 } else { 0 };
        if per_set == 0 {
            return Ok(None);
        }
        let device = self.features.image_embed.device();
        // The prompt encoder's dtype: the coordinates meet its position-encoding matrix.
        let dtype = self.model.sam_prompt_encoder.dtype();
        Ok(Some(PointPrompts {
            coords: Tensor::from_data(
                TensorData::new(coords, [sets.len(), per_set, 2]),
                (&device, dtype),
            ),
            labels: Tensor::<B, 1, Int>::from_ints(labels.as_slice(), &device)
                .reshape([sets.len(), per_set]),
        }))
    }

    /// Predicts masks for every prompt set (one object each).
    ///
    /// `mask_input`: `[P, 1, S/4, S/4]` low-resolution logits from an earlier call (any float
    /// dtype; cast to the model's). With a mask prompt the sets may have neither points nor a
    /// box (all of them, as sets are predicted together): the mask alone refines an earlier
    /// prediction, as upstream's `predict(mask_input=…)`.
    /// `multimask_output`: 3 masks per set; otherwise 1, replaced by the best of the 3 when it
    /// is unstable (SAM 2.1's dynamic multimask).
    pub fn predict(
        &self,
        sets: &[PromptSet],
        mask_input: Option<Tensor<B, 4>>,
        multimask_output: bool,
    ) -> Result<ImagePrediction<B>, Sam2Error> {
        let points = self.optional_point_prompts(sets)?;
        match &mask_input {
            None if points.is_none() => {
                return Err(Sam2Error::prompt(
                    "the prompt sets have neither points, a box nor a mask prompt",
                ))
            }
            Some(mask) if mask.dims()[0] != sets.len() => {
                return Err(Sam2Error::prompt(format!(
                    "mask_input has {} masks but {} prompt sets were given (one mask per set)",
                    mask.dims()[0],
                    sets.len()
                )))
            }
            _ => {}
        }
        let prompts = Prompts {
            points,
            boxes: None,
            masks: mask_input,
        };
        let input = self.model.decoder_input(&self.features, prompts)?;
        let output = self
            .model
            .sam_mask_decoder
            .forward_inference(input, multimask_output)?;
        Ok(ImagePrediction {
            masks: upscale_mask_logits(output.masks.clone(), self.original_size),
            iou_pred: output.iou_pred,
            low_res_masks: output.masks.clamp(-32.0, 32.0),
            object_score_logits: output.object_score_logits,
        })
    }
}

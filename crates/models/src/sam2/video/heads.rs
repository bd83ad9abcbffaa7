//! The prompt encoder and mask decoder on a video frame (`SAM2Base._forward_sam_heads` and
//! `_use_mask_as_output`): masks at both resolutions, the best mask, the object score and the
//! object pointer that later frames attend to.

use burn::tensor::{backend::Backend, Bool, Int, Tensor, TensorData};

use crate::nn::conv2d_as_configured;
use crate::sam2::preprocess::resize_planes;
use crate::sam2::{upscale_mask_logits, ImageFeatures, PointPrompts, Prompts, Sam2, Sam2Error};

/// The logit written where the object is predicted absent (`NO_OBJ_SCORE` upstream).
pub const NO_OBJECT_SCORE: f64 = -1024.0;

/// What the heads predict on a frame, for a batch of `B` objects.
#[derive(Debug, Clone)]
pub struct FramePrediction<B: Backend> {
    /// `[B, M, 4h, 4w]`: every output mask (M = 3 with multimask output, else 1), `-1024`
    /// where the object is predicted absent.
    pub low_res_multimasks: Tensor<B, 4>,
    /// `[B, M]`: their predicted IoU.
    pub ious: Tensor<B, 2>,
    /// `[B, 1, 4h, 4w]`: the best mask (the highest predicted IoU).
    pub low_res_masks: Tensor<B, 4>,
    /// `[B, 1, 16h, 16w]`: the best mask at the model's input resolution.
    pub high_res_masks: Tensor<B, 4>,
    /// `[B, C]`: the object pointer.
    pub obj_ptr: Tensor<B, 2>,
    /// `[B, 1]`: positive when the object is present.
    pub object_score_logits: Tensor<B, 2>,
}

impl<B: Backend> Sam2<B> {
    /// `_forward_sam_heads` in eval mode: `features.image_embed` `[B, C, h, w]` (the frame's
    /// memory-conditioned features), the projected high-res levels, optional clicks and an
    /// optional mask prompt `[B, 1, H, W]` (shrunk with the antialiased bilinear filter when it
    /// is not the prompt encoder's mask size). Without clicks, one padding point is used.
    pub fn frame_heads(
        &self,
        features: &ImageFeatures<B>,
        points: Option<PointPrompts<B>>,
        mask_inputs: Option<Tensor<B, 4>>,
        multimask_output: bool,
    ) -> Result<FramePrediction<B>, Sam2Error> {
        let [b, _, h, w] = features.image_embed.dims();
        let device = features.image_embed.device();
        let points = points.unwrap_or_else(|| PointPrompts {
            coords: Tensor::zeros([b, 1, 2], &device),
            labels: Tensor::<B, 2, Int>::ones([b, 1], &device).neg(),
        });
        let mask_size = [4 * h, 4 * w];
        let masks = mask_inputs
            .map(|m| shrink_masks(m, mask_size))
            .transpose()?;
        let prompts = Prompts {
            points: Some(points),
            boxes: None,
            masks,
        };
        let input = self.decoder_input(features, prompts)?;
        let decoded = self
            .sam_mask_decoder
            .forward_inference(input, multimask_output)?;
        let object_score_logits = decoded.object_score_logits;
        let present = object_score_logits.clone().greater_elem(0.0);
        let [_, m, mh, mw] = decoded.masks.dims();
        let low_res_multimasks = decoded.masks.mask_fill(
            present
                .clone()
                .reshape([b, 1, 1, 1])
                .expand([b, m, mh, mw])
                .bool_not(),
            NO_OBJECT_SCORE,
        );
        let image_size = self.sam_prompt_encoder.input_image_size();
        let (low_res_masks, token) = if multimask_output {
            let best = decoded.iou_pred.clone().argmax(1); // [B, 1]
            let best_masks = low_res_multimasks
                .clone()
                .gather(1, best.clone().reshape([b, 1, 1, 1]).expand([b, 1, mh, mw]));
            let [_, tokens, c] = decoded.sam_tokens_out.dims();
            let token = if tokens > 1 {
                decoded
                    .sam_tokens_out
                    .gather(1, best.reshape([b, 1, 1]).expand([b, 1, c]))
            } else {
                decoded.sam_tokens_out
            };
            (best_masks, token)
        } else {
            (
                low_res_multimasks.clone(),
                decoded.sam_tokens_out.narrow(1, 0, 1),
            )
        };
        let high_res_masks = upscale_mask_logits(low_res_masks.clone(), image_size);
        let [_, _, c] = token.dims();
        let obj_ptr = self
            .video_part(&self.obj_ptr_proj, "obj_ptr_proj")?
            .forward(token.reshape([b, c]));
        let obj_ptr = self.gate_object_pointer(obj_ptr, present)?;
        Ok(FramePrediction {
            low_res_multimasks,
            ious: decoded.iou_pred,
            low_res_masks,
            high_res_masks,
            obj_ptr,
            object_score_logits,
        })
    }

    /// `_use_mask_as_output`: a mask given on a frame `[B, 1, H, W]` (H, W the model's input
    /// size; values in [0, 1]) becomes the output itself (logits ±10); only the object pointer
    /// comes from the heads, prompted with the mask shrunk by `mask_downsample`.
    pub fn mask_as_output(
        &self,
        features: &ImageFeatures<B>,
        mask_inputs: Tensor<B, 4>,
    ) -> Result<FramePrediction<B>, Sam2Error> {
        let [b, _, hh, ww] = mask_inputs.dims();
        let high_res_masks = mask_inputs.clone() * 20.0 - 10.0;
        let low_res_masks = shrink_masks(high_res_masks.clone(), [hh / 4, ww / 4])?;
        let downsample = self.video_part(&self.mask_downsample, "mask_downsample")?;
        let prompt = conv2d_as_configured(downsample, mask_inputs.clone());
        let from_heads = self.frame_heads(features, None, Some(prompt), false)?;
        let present = mask_inputs
            .reshape([b, hh * ww])
            .greater_elem(0.0)
            .any_dim(1); // [B, 1]
        let present_float = present.clone().float().cast(high_res_masks.dtype());
        let object_score_logits = present_float * 20.0 - 10.0;
        let obj_ptr = self.gate_object_pointer(from_heads.obj_ptr, present)?;
        Ok(FramePrediction {
            low_res_multimasks: low_res_masks.clone(),
            ious: Tensor::ones([b, 1], &high_res_masks.device()),
            low_res_masks,
            high_res_masks,
            obj_ptr,
            object_score_logits,
        })
    }

    /// `fixed_no_obj_ptr`: the pointer of an absent object is `no_obj_ptr` alone.
    fn gate_object_pointer(
        &self,
        obj_ptr: Tensor<B, 2>,
        present: Tensor<B, 2, Bool>,
    ) -> Result<Tensor<B, 2>, Sam2Error> {
        let no_obj_ptr = self.video_part(&self.no_obj_ptr, "no_obj_ptr")?.val();
        let presence = present.float().cast(obj_ptr.dtype()); // [B, 1]
        let absence = presence.clone().neg() + 1.0;
        Ok(obj_ptr * presence + no_obj_ptr.cast(absence.dtype()) * absence)
    }

    /// A part of the video memory, or the error that the model has none.
    pub(crate) fn video_part<'a, T>(
        &self,
        part: &'a Option<T>,
        name: &str,
    ) -> Result<&'a T, Sam2Error> {
        part.as_ref().ok_or_else(|| {
            Sam2Error::Config(format!(
                "this model has no video memory (`{name}`): build it with `video: Some(...)`, e.g. \
                 Sam2Config::sam2_1_hiera_video"
            ))
        })
    }
}

/// `[B, 1, H, W]` -> `[B, 1, h, w]` with PyTorch's antialiased bilinear filter
/// (`F.interpolate(bilinear, antialias=True, align_corners=False)`), on the host; the identity
/// when the size already fits.
fn shrink_masks<B: Backend>(
    masks: Tensor<B, 4>,
    [h, w]: [usize; 2],
) -> Result<Tensor<B, 4>, Sam2Error> {
    let [b, c, mh, mw] = masks.dims();
    if [mh, mw] == [h, w] {
        return Ok(masks);
    }
    let dtype = masks.dtype();
    let device = masks.device();
    let values: Vec<f64> = masks
        .into_data()
        .convert::<f64>()
        .to_vec()
        .map_err(|e| Sam2Error::shape(format!("mask prompt: {e:?}")))?;
    let shrunk = resize_planes(&values, [b * c, mh, mw], [h, w]);
    let data = TensorData::new(shrunk, [b, c, h, w]);
    Ok(Tensor::<B, 4>::from_data(data, (&device, dtype)))
}

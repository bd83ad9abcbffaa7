//! Which of the [`MaskDecoder`]'s predictions come out: the single mask or the multimask
//! outputs, the tokens for the object pointer, and SAM2's inference-time fallback from an
//! unstable single mask to the best multimask output.

use burn::tensor::{backend::Backend, Tensor};

use super::{MaskDecoder, MaskDecoderOutput, MaskPredictions};

impl<B: Backend> MaskDecoder<B> {
    /// Picks the single-mask or multimask outputs (and the stability fallback).
    pub(super) fn select_outputs(
        &self,
        predictions: MaskPredictions<B>,
        multimask_output: bool,
        dynamic: bool,
    ) -> MaskDecoderOutput<B> {
        let MaskPredictions {
            masks,
            iou_pred,
            mask_tokens_out,
            object_score_logits,
            ..
        } = predictions;
        let [_, num_tokens, _, _] = masks.dims();
        let (masks_out, iou_out) = if multimask_output {
            (
                masks.narrow(1, 1, num_tokens - 1),
                iou_pred.narrow(1, 1, num_tokens - 1),
            )
        } else if dynamic {
            self.dynamic_multimask_via_stability(masks, iou_pred)
        } else {
            (masks.narrow(1, 0, 1), iou_pred.narrow(1, 0, 1))
        };
        let sam_tokens_out = if multimask_output && self.use_multimask_token_for_obj_ptr {
            mask_tokens_out.narrow(1, 1, num_tokens - 1)
        } else {
            mask_tokens_out.narrow(1, 0, 1)
        };
        MaskDecoderOutput {
            masks: masks_out,
            iou_pred: iou_out,
            sam_tokens_out,
            object_score_logits,
        }
    }

    /// Keeps mask 0 where its stability score `|m > δ| / |m > −δ|` reaches the threshold,
    /// otherwise takes the multimask output with the highest predicted IoU.
    fn dynamic_multimask_via_stability(
        &self,
        masks: Tensor<B, 4>,
        iou_pred: Tensor<B, 2>,
    ) -> (Tensor<B, 4>, Tensor<B, 2>) {
        let [batch, num_tokens, h, w] = masks.dims();
        let multi_iou = iou_pred.clone().narrow(1, 1, num_tokens - 1);
        let best = multi_iou.argmax(1) + 1;
        let best_masks = masks.clone().gather(
            1,
            best.clone()
                .reshape([batch, 1, 1, 1])
                .expand([batch, 1, h, w]),
        );
        let best_iou = iou_pred.clone().gather(1, best);

        let single = masks.narrow(1, 0, 1);
        let flat = single.clone().reshape([batch, h * w]);
        let delta = self.dynamic_multimask_stability_delta;
        let area_i = flat.clone().greater_elem(delta).float().sum_dim(1);
        let area_u = flat.greater_elem(-delta).float().sum_dim(1);
        let empty = area_u.clone().lower_equal_elem(0.0);
        let stability = (area_i / area_u.clamp_min(1.0)).mask_fill(empty, 1.0);
        let stable = stability.greater_equal_elem(self.dynamic_multimask_stability_thresh);

        let masks = best_masks.mask_where(
            stable
                .clone()
                .reshape([batch, 1, 1, 1])
                .expand([batch, 1, h, w]),
            single,
        );
        let iou = best_iou.mask_where(stable, iou_pred.narrow(1, 0, 1));
        (masks, iou)
    }
}

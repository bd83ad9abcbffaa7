//! What goes into and comes out of the [`MaskDecoder`]: the image and prompt embeddings for a
//! batch of prompt sets (and the check of their shapes), every mask token's prediction, and the
//! selected outputs.

use burn::tensor::{backend::Backend, DType, Tensor};

use super::MaskDecoder;
use crate::sam2::Sam2Error;

/// The high-resolution image features, already projected by `conv_s0`/`conv_s1`.
#[derive(Debug, Clone)]
pub struct HighResFeatures<B: Backend> {
    /// Stride 4: `[Bi, C/8, 4h, 4w]` (32 channels).
    pub feat_s0: Tensor<B, 4>,
    /// Stride 8: `[Bi, C/4, 2h, 2w]` (64 channels).
    pub feat_s1: Tensor<B, 4>,
}

impl<B: Backend> HighResFeatures<B> {
    /// Both levels in `dtype` (a no-op when they already are).
    pub fn cast(self, dtype: impl Into<DType>) -> Self {
        let dtype = dtype.into();
        Self {
            feat_s0: self.feat_s0.cast(dtype),
            feat_s1: self.feat_s1.cast(dtype),
        }
    }
}

/// Inputs of the decoder for `B` prompt sets.
#[derive(Debug, Clone)]
pub struct MaskDecoderInput<B: Backend> {
    /// `[Bi, C, h, w]` with `Bi` = 1 (shared by all prompt sets) or `B`.
    pub image_embeddings: Tensor<B, 4>,
    /// `[1, C, h, w]`: the prompt encoder's dense position encoding.
    pub image_pe: Tensor<B, 4>,
    /// `[B, N_sparse, C]`.
    pub sparse_prompt_embeddings: Tensor<B, 3>,
    /// `[B, C, h, w]`.
    pub dense_prompt_embeddings: Tensor<B, 4>,
    /// Required when the decoder uses high-resolution features; batch 1 or `Bi`.
    pub high_res_features: Option<HighResFeatures<B>>,
}

impl<B: Backend> MaskDecoderInput<B> {
    /// Every tensor in `dtype` (a no-op for the tensors already in it).
    pub fn cast_to(self, dtype: DType) -> Self {
        Self {
            image_embeddings: self.image_embeddings.cast(dtype),
            image_pe: self.image_pe.cast(dtype),
            sparse_prompt_embeddings: self.sparse_prompt_embeddings.cast(dtype),
            dense_prompt_embeddings: self.dense_prompt_embeddings.cast(dtype),
            high_res_features: self.high_res_features.map(|f| f.cast(dtype)),
        }
    }
}

/// Every mask token's prediction, plus intermediates (for inspection and parity tests).
#[derive(Debug, Clone)]
pub struct MaskPredictions<B: Backend> {
    /// `[B, T, 4h, 4w]` low-resolution logits; T = 1 + num_multimask_outputs, mask 0 is the
    /// single-mask output.
    pub masks: Tensor<B, 4>,
    /// `[B, T]`.
    pub iou_pred: Tensor<B, 2>,
    /// `[B, T, C]`: the transformer's mask-token outputs.
    pub mask_tokens_out: Tensor<B, 3>,
    /// `[B, 1]`: raw logits (> 0 means the object is present).
    pub object_score_logits: Tensor<B, 2>,
    /// `[B, N_tokens, C]`: every token after the transformer.
    pub hs: Tensor<B, 3>,
    /// `[B, h·w, C]`: the image tokens after the transformer.
    pub keys: Tensor<B, 3>,
    /// `[B, C/8, 4h, 4w]`: the upscaled image features the hypernetworks read.
    pub upscaled: Tensor<B, 4>,
}

/// The decoder's selected outputs.
#[derive(Debug, Clone)]
pub struct MaskDecoderOutput<B: Backend> {
    /// `[B, M, 4h, 4w]` with M = 3 (multimask) or 1.
    pub masks: Tensor<B, 4>,
    /// `[B, M]`.
    pub iou_pred: Tensor<B, 2>,
    /// `[B, M', C]`: the tokens for SAM2's object pointer.
    pub sam_tokens_out: Tensor<B, 3>,
    /// `[B, 1]`.
    pub object_score_logits: Tensor<B, 2>,
}

impl<B: Backend> MaskDecoder<B> {
    /// Validates the input shapes; returns the embedding grid `(h, w)`.
    pub(super) fn check_input(&self, input: &MaskDecoderInput<B>) -> Result<[usize; 2], Sam2Error> {
        let c = self.transformer_dim;
        let [batch, _, sc] = input.sparse_prompt_embeddings.dims();
        let [bi, ic, h, w] = input.image_embeddings.dims();
        let shape_error = |what: &str, expected: String, got: &[usize]| {
            Err(Sam2Error::shape(format!(
                "{what}: expected {expected}, got {got:?}"
            )))
        };
        if sc != c {
            return shape_error(
                "sparse prompt embeddings",
                format!("[B, N, {c}]"),
                &[batch, 0, sc],
            );
        }
        if ic != c || (bi != 1 && bi != batch) {
            return shape_error(
                "image embeddings",
                format!("[1 or {batch}, {c}, h, w]"),
                &[bi, ic, h, w],
            );
        }
        let pe = input.image_pe.dims();
        if pe[1..] != [c, h, w] || (pe[0] != 1 && pe[0] != batch) {
            return shape_error("image PE", format!("[1, {c}, {h}, {w}]"), &pe);
        }
        let dense = input.dense_prompt_embeddings.dims();
        if dense != [batch, c, h, w] {
            return shape_error(
                "dense prompt embeddings",
                format!("[{batch}, {c}, {h}, {w}]"),
                &dense,
            );
        }
        if self.use_high_res_features {
            let Some(features) = &input.high_res_features else {
                return Err(Sam2Error::shape(
                    "this decoder uses high-resolution features (feat_s0, feat_s1) but none were given",
                ));
            };
            for (name, feature, scale, channels) in [
                ("feat_s0", &features.feat_s0, 4, c / 8),
                ("feat_s1", &features.feat_s1, 2, c / 4),
            ] {
                let dims = feature.dims();
                if dims[1..] != [channels, scale * h, scale * w]
                    || (dims[0] != 1 && dims[0] != batch)
                {
                    return shape_error(
                        name,
                        format!("[1 or {batch}, {channels}, {}, {}]", scale * h, scale * w),
                        &dims,
                    );
                }
            }
        }
        Ok([h, w])
    }
}

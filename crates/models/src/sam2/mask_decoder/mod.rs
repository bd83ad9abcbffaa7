//! SAM2's mask decoder (`sam2/modeling/sam/mask_decoder.py`): a two-way transformer over
//! output tokens and image tokens, then upscaling and hypernetwork heads that turn the mask
//! tokens into low-resolution mask logits, an IoU head and an object-score head.

mod io;
mod selection;

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig, ConvTranspose2d, ConvTranspose2dConfig};
use burn::nn::{Embedding, EmbeddingConfig, Gelu};
use burn::tensor::{backend::Backend, Tensor};

pub use self::io::{HighResFeatures, MaskDecoderInput, MaskDecoderOutput, MaskPredictions};
use super::layer_norm2d::{LayerNorm2d, LayerNorm2dConfig};
use super::mlp::{Mlp, MlpConfig};
use super::transformer::{TwoWayTransformer, TwoWayTransformerConfig};
use super::Sam2Error;
use crate::nn::{channels_first_image, conv2d_in_input_dtype, conv_transpose2d_in_input_dtype};
use segburn_kernels::gelu;

/// Configuration of a [`MaskDecoder`]; the defaults are SAM2.1's (every model size).
#[derive(Config, Debug)]
pub struct MaskDecoderConfig {
    /// Channels of tokens and image features.
    #[config(default = 256)]
    pub transformer_dim: usize,
    /// The two-way transformer.
    #[config(default = "TwoWayTransformerConfig::new()")]
    pub transformer: TwoWayTransformerConfig,
    /// Masks of the multimask output; one more token predicts the single mask.
    #[config(default = 3)]
    pub num_multimask_outputs: usize,
    /// Layers of the IoU head.
    #[config(default = 3)]
    pub iou_head_depth: usize,
    /// Hidden width of the IoU head.
    #[config(default = 256)]
    pub iou_head_hidden_dim: usize,
    /// Adds the stride-4 and stride-8 features during upscaling (and builds `conv_s0/s1`).
    #[config(default = true)]
    pub use_high_res_features: bool,
    /// Applies a sigmoid to the IoU head.
    #[config(default = true)]
    pub iou_prediction_use_sigmoid: bool,
    /// Adds the object-score token and its MLP head (SAM2's `pred_obj_scores_mlp`).
    #[config(default = true)]
    pub pred_obj_scores: bool,
    /// With multimask output, returns the three multimask tokens for the object pointer.
    #[config(default = true)]
    pub use_multimask_token_for_obj_ptr: bool,
    /// At inference, falls back from the single mask to the best multimask output when the
    /// single mask is unstable (`build_sam2(apply_postprocessing=True)` turns this on).
    #[config(default = false)]
    pub dynamic_multimask_via_stability: bool,
    /// Logit offset of the stability score.
    #[config(default = 0.05)]
    pub dynamic_multimask_stability_delta: f64,
    /// Minimum stability to keep the single mask.
    #[config(default = 0.98)]
    pub dynamic_multimask_stability_thresh: f64,
}

/// The `output_upscaling` Sequential; tuple positions are the official state-dict indices.
pub type OutputUpscaling<B> = (
    ConvTranspose2d<B>,
    LayerNorm2d<B>,
    Gelu,
    ConvTranspose2d<B>,
    Gelu,
);

/// The mask decoder. Field names follow the official state dict.
#[derive(Module, Debug)]
pub struct MaskDecoder<B: Backend> {
    /// The two-way transformer.
    pub transformer: TwoWayTransformer<B>,
    /// `[1, C]`.
    pub iou_token: Embedding<B>,
    /// `[1 + num_multimask_outputs, C]`.
    pub mask_tokens: Embedding<B>,
    /// `[1, C]`, with `pred_obj_scores`.
    pub obj_score_token: Option<Embedding<B>>,
    /// ConvT(C→C/4), LayerNorm2d, GELU, ConvT(C/4→C/8), GELU.
    pub output_upscaling: OutputUpscaling<B>,
    /// Projects the stride-4 backbone features (C→C/8). Applied by the caller, not `forward`.
    pub conv_s0: Option<Conv2d<B>>,
    /// Projects the stride-8 backbone features (C→C/4). Applied by the caller, not `forward`.
    pub conv_s1: Option<Conv2d<B>>,
    /// One MLP(C, C, C/8, 3) per mask token.
    pub output_hypernetworks_mlps: Vec<Mlp<B>>,
    /// MLP(C, hidden, T, depth), sigmoid output.
    pub iou_prediction_head: Mlp<B>,
    /// MLP(C, C, 1, 3), with `pred_obj_scores`.
    pub pred_obj_score_head: Option<Mlp<B>>,
    transformer_dim: usize,
    use_high_res_features: bool,
    use_multimask_token_for_obj_ptr: bool,
    dynamic_multimask_via_stability: bool,
    dynamic_multimask_stability_delta: f64,
    dynamic_multimask_stability_thresh: f64,
}

impl MaskDecoderConfig {
    /// Builds the decoder with PyTorch's default initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> MaskDecoder<B> {
        let c = self.transformer_dim;
        let num_mask_tokens = self.num_multimask_outputs + 1;
        let stride2 = |channels: [usize; 2]| {
            ConvTranspose2dConfig::new(channels, [2, 2])
                .with_stride([2, 2])
                .init(device)
        };
        let high_res = |out: usize| {
            self.use_high_res_features
                .then(|| Conv2dConfig::new([c, out], [1, 1]).init(device))
        };
        MaskDecoder {
            transformer: self.transformer.clone().with_embedding_dim(c).init(device),
            iou_token: EmbeddingConfig::new(1, c).init(device),
            mask_tokens: EmbeddingConfig::new(num_mask_tokens, c).init(device),
            obj_score_token: self
                .pred_obj_scores
                .then(|| EmbeddingConfig::new(1, c).init(device)),
            output_upscaling: (
                stride2([c, c / 4]),
                LayerNorm2dConfig::new(c / 4).init(device),
                Gelu::new(),
                stride2([c / 4, c / 8]),
                Gelu::new(),
            ),
            conv_s0: high_res(c / 8),
            conv_s1: high_res(c / 4),
            output_hypernetworks_mlps: (0..num_mask_tokens)
                .map(|_| MlpConfig::new(c, c, c / 8, 3).init(device))
                .collect(),
            iou_prediction_head: MlpConfig::new(
                c,
                self.iou_head_hidden_dim,
                num_mask_tokens,
                self.iou_head_depth,
            )
            .with_sigmoid_output(self.iou_prediction_use_sigmoid)
            .init(device),
            pred_obj_score_head: self
                .pred_obj_scores
                .then(|| MlpConfig::new(c, c, 1, 3).init(device)),
            transformer_dim: c,
            use_high_res_features: self.use_high_res_features,
            use_multimask_token_for_obj_ptr: self.use_multimask_token_for_obj_ptr,
            dynamic_multimask_via_stability: self.dynamic_multimask_via_stability,
            dynamic_multimask_stability_delta: self.dynamic_multimask_stability_delta,
            dynamic_multimask_stability_thresh: self.dynamic_multimask_stability_thresh,
        }
    }
}

impl<B: Backend> MaskDecoder<B> {
    /// Training-time forward (never applies the dynamic multimask fallback):
    /// masks `[B, M, 4h, 4w]`, iou `[B, M]`, tokens `[B, M', C]`, object logits `[B, 1]`,
    /// with M = 3 when `multimask_output`, else 1.
    pub fn forward(
        &self,
        input: MaskDecoderInput<B>,
        multimask_output: bool,
    ) -> Result<MaskDecoderOutput<B>, Sam2Error> {
        let predictions = self.predict_masks(input)?;
        Ok(self.select_outputs(predictions, multimask_output, false))
    }

    /// Inference-time forward: like [`forward`](Self::forward), but a single-mask request falls
    /// back to the best multimask output when the single mask is unstable, if the decoder was
    /// configured with `dynamic_multimask_via_stability` (upstream does this only in eval mode).
    pub fn forward_inference(
        &self,
        input: MaskDecoderInput<B>,
        multimask_output: bool,
    ) -> Result<MaskDecoderOutput<B>, Sam2Error> {
        let predictions = self.predict_masks(input)?;
        let dynamic = self.dynamic_multimask_via_stability;
        Ok(self.select_outputs(predictions, multimask_output, dynamic))
    }

    /// Projects raw stride-4 / stride-8 backbone features (`[N, C, 4h, 4w]`, `[N, C, 2h, 2w]`)
    /// with `conv_s0` / `conv_s1`; `None` when the decoder has no high-resolution path.
    pub fn project_high_res(
        &self,
        level0: Tensor<B, 4>,
        level1: Tensor<B, 4>,
    ) -> Option<HighResFeatures<B>> {
        match (&self.conv_s0, &self.conv_s1) {
            (Some(conv_s0), Some(conv_s1)) => Some(HighResFeatures {
                feat_s0: conv2d_in_input_dtype(conv_s0, level0),
                feat_s1: conv2d_in_input_dtype(conv_s1, level1),
            }),
            _ => None,
        }
    }

    /// Runs the transformer and every head; see [`MaskPredictions`] for shapes.
    pub fn predict_masks(
        &self,
        input: MaskDecoderInput<B>,
    ) -> Result<MaskPredictions<B>, Sam2Error> {
        let c = self.transformer_dim;
        let [batch, _, _] = input.sparse_prompt_embeddings.dims();
        let [h, w] = self.check_input(&input)?;
        // The decoder computes in the dtype of the image embeddings: the prompt embeddings,
        // the positional encoding and the learned tokens (f32) are cast to it.
        let dtype = input.image_embeddings.dtype();
        let input = input.cast_to(dtype);

        // Token order: [obj_score, iou, mask_0..T-1, sparse prompts...].
        let mut output_tokens = Vec::with_capacity(3);
        if let Some(token) = &self.obj_score_token {
            output_tokens.push(token.weight.val());
        }
        output_tokens.push(self.iou_token.weight.val());
        output_tokens.push(self.mask_tokens.weight.val());
        let output_tokens = Tensor::cat(output_tokens, 0).cast(dtype);
        let [num_output_tokens, _] = output_tokens.dims();
        let output_tokens = output_tokens
            .unsqueeze::<3>()
            .expand([batch, num_output_tokens, c]);
        let tokens = if input.sparse_prompt_embeddings.dims()[1] == 0 {
            output_tokens
        } else {
            Tensor::cat(vec![output_tokens, input.sparse_prompt_embeddings], 1)
        };

        let src = add_per_image(input.dense_prompt_embeddings, input.image_embeddings);
        let pos_src = repeat_batch(input.image_pe, batch);
        let (hs, keys) = self.transformer.forward(src, pos_src, tokens);

        let first = usize::from(self.obj_score_token.is_some());
        let num_mask_tokens = self.output_hypernetworks_mlps.len();
        let iou_token_out = hs.clone().narrow(1, first, 1).reshape([batch, c]);
        let mask_tokens_out = hs.clone().narrow(1, first + 1, num_mask_tokens);

        let src = channels_first_image(keys.clone(), [h, w]);
        let upscaled = self.upscale(src, input.high_res_features);

        let hyper_in = Tensor::cat(
            self.output_hypernetworks_mlps
                .iter()
                .enumerate()
                .map(|(i, mlp)| mlp.forward(mask_tokens_out.clone().narrow(1, i, 1)))
                .collect(),
            1,
        );
        let [_, up_c, up_h, up_w] = upscaled.dims();
        let masks = hyper_in
            .matmul(upscaled.clone().reshape([batch, up_c, up_h * up_w]))
            .reshape([batch, num_mask_tokens, up_h, up_w]);

        let iou_pred = self.iou_prediction_head.forward(iou_token_out);
        let object_score_logits = match &self.pred_obj_score_head {
            Some(head) => head.forward(hs.clone().narrow(1, 0, 1).reshape([batch, c])),
            // Upstream's constant "object present" logit when the head is disabled.
            None => Tensor::full([batch, 1], 10.0, (&hs.device(), hs.dtype())),
        };
        Ok(MaskPredictions {
            masks,
            iou_pred,
            mask_tokens_out,
            object_score_logits,
            hs,
            keys,
            upscaled,
        })
    }

    /// `[B, C, h, w] -> [B, C/8, 4h, 4w]`
    fn upscale(&self, src: Tensor<B, 4>, high_res: Option<HighResFeatures<B>>) -> Tensor<B, 4> {
        // The GELUs through `kernels::gelu` (PyTorch's CPU erf, our gradient), not `Gelu::forward`.
        let (conv0, norm1, _, conv3, _) = &self.output_upscaling;
        let up = conv_transpose2d_in_input_dtype;
        match high_res.filter(|_| self.use_high_res_features) {
            // The high-res features go in *before* the norm (s1) and *before* the last GELU (s0).
            Some(features) => {
                let x = add_per_image(up(conv0, src), features.feat_s1);
                let x = gelu(norm1.forward(x));
                gelu(add_per_image(up(conv3, x), features.feat_s0))
            }
            None => gelu(up(conv3, gelu(norm1.forward(up(conv0, src))))),
        }
    }
}

/// `x + y` for `x` `[B, C, H, W]` and `y` of batch 1 (one image's features for all its
/// prompts, upstream's `repeat_interleave`) or `B`. Added as `[B, C·H·W] + [1, C·H·W]`: Flex
/// adds that broadcast with its vector path, while a `[1, C, H, W]` broadcast walks every
/// element through a strided index, forward and backward.
fn add_per_image<B: Backend>(x: Tensor<B, 4>, y: Tensor<B, 4>) -> Tensor<B, 4> {
    let dims = x.dims();
    let [batch, c, h, w] = dims;
    let images = y.dims()[0];
    if images == batch {
        x + y
    } else {
        (x.reshape([batch, c * h * w]) + y.reshape([images, c * h * w])).reshape(dims)
    }
}

/// Repeats a batch-1 tensor to `batch` (upstream's `repeat_interleave` and broadcasting).
fn repeat_batch<B: Backend>(x: Tensor<B, 4>, batch: usize) -> Tensor<B, 4> {
    let [b, c, h, w] = x.dims();
    if b == batch {
        x
    } else {
        x.expand([batch, c, h, w])
    }
}

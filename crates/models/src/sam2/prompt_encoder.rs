//! SAM2's prompt encoder: points, boxes and low-resolution mask logits → sparse and dense
//! prompt embeddings (`sam2/modeling/sam/prompt_encoder.py`).

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Embedding, EmbeddingConfig, Gelu};
use burn::tensor::{backend::Backend, DType, Int, Tensor};

use segburn_kernels::gelu;

use super::layer_norm2d::{LayerNorm2d, LayerNorm2dConfig};
use super::position_encoding::{PositionEmbeddingRandom, PositionEmbeddingRandomConfig};
use super::Sam2Error;

/// Configuration of a [`PromptEncoder`].
#[derive(Config, Debug)]
pub struct PromptEncoderConfig {
    /// Channels of the prompt embeddings (256).
    #[config(default = 256)]
    pub embed_dim: usize,
    /// `(h, w)` of the image embedding: the input size / 16 (64×64 for SAM2.1 at 1024 px).
    pub image_embedding_size: [usize; 2],
    /// `(H, W)` of the input image in pixels; point coordinates are in this frame.
    pub input_image_size: [usize; 2],
    /// Hidden channels of the mask-prompt downscaling convolutions.
    #[config(default = 16)]
    pub mask_in_chans: usize,
}

/// The `mask_downscaling` Sequential; tuple positions are the official state-dict indices.
pub type MaskDownscaling<B> = (
    Conv2d<B>,
    LayerNorm2d<B>,
    Gelu,
    Conv2d<B>,
    LayerNorm2d<B>,
    Gelu,
    Conv2d<B>,
);

/// Point prompts: coordinates `[B, N, 2]` as (x, y) in input-image pixels and labels `[B, N]`.
///
/// Labels: −1 = not a point (padding), 0 = negative click, 1 = positive click, 2 = box top-left,
/// 3 = box bottom-right. Any other label leaves the bare position encoding, as upstream.
#[derive(Debug, Clone)]
pub struct PointPrompts<B: Backend> {
    /// `[B, N, 2]`, (x, y) in pixels of the input image.
    pub coords: Tensor<B, 3>,
    /// `[B, N]`.
    pub labels: Tensor<B, 2, Int>,
}

/// The prompt encoder's outputs.
#[derive(Debug, Clone)]
pub struct PromptEmbeddings<B: Backend> {
    /// `[B, N_sparse, C]`: one token per point (and padding token) and two per box.
    pub sparse: Tensor<B, 3>,
    /// `[B, C, h, w]`: the embedded mask prompt, or `no_mask_embed` broadcast over the grid.
    pub dense: Tensor<B, 4>,
}

/// Encodes prompts for the mask decoder. Field names follow the official state dict.
#[derive(Module, Debug)]
pub struct PromptEncoder<B: Backend> {
    /// The random Fourier position encoding (its matrix is a non-trained buffer).
    pub pe_layer: PositionEmbeddingRandom<B>,
    /// 0 = negative point, 1 = positive point, 2 = box top-left, 3 = box bottom-right.
    pub point_embeddings: Vec<Embedding<B>>,
    /// Replaces the encoding of padding points (label −1).
    pub not_a_point_embed: Embedding<B>,
    /// `[1,1,4h,4w]` mask logits → `[1,C,h,w]`.
    pub mask_downscaling: MaskDownscaling<B>,
    /// The dense embedding when no mask prompt is given.
    pub no_mask_embed: Embedding<B>,
    embed_dim: usize,
    image_embedding_size: [usize; 2],
    input_image_size: [usize; 2],
}

impl PromptEncoderConfig {
    /// Builds the encoder with PyTorch's default initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> PromptEncoder<B> {
        let c = self.embed_dim;
        let hidden = self.mask_in_chans;
        let embedding = || EmbeddingConfig::new(1, c).init(device);
        PromptEncoder {
            pe_layer: PositionEmbeddingRandomConfig::new(c / 2).init(device),
            point_embeddings: (0..4).map(|_| embedding()).collect(),
            not_a_point_embed: embedding(),
            mask_downscaling: (
                Conv2dConfig::new([1, hidden / 4], [2, 2])
                    .with_stride([2, 2])
                    .init(device),
                LayerNorm2dConfig::new(hidden / 4).init(device),
                Gelu::new(),
                Conv2dConfig::new([hidden / 4, hidden], [2, 2])
                    .with_stride([2, 2])
                    .init(device),
                LayerNorm2dConfig::new(hidden).init(device),
                Gelu::new(),
                Conv2dConfig::new([hidden, c], [1, 1]).init(device),
            ),
            no_mask_embed: embedding(),
            embed_dim: c,
            image_embedding_size: self.image_embedding_size,
            input_image_size: self.input_image_size,
        }
    }
}

impl<B: Backend> PromptEncoder<B> {
    /// Channels of the embeddings.
    pub fn embed_dim(&self) -> usize {
        self.embed_dim
    }

    /// `(h, w)` of the image embedding.
    pub fn image_embedding_size(&self) -> [usize; 2] {
        self.image_embedding_size
    }

    /// `(H, W)` of the input image.
    pub fn input_image_size(&self) -> [usize; 2] {
        self.input_image_size
    }

    /// The dtype of the weights (the model's, or f32 master weights under mixed precision):
    /// the dtype this encoder computes in and the one its inputs must have.
    pub fn dtype(&self) -> DType {
        self.no_mask_embed.weight.dtype()
    }

    /// `(4h, 4w)`: the size mask prompts must have.
    pub fn mask_input_size(&self) -> [usize; 2] {
        let [h, w] = self.image_embedding_size;
        [4 * h, 4 * w]
    }

    /// The dense position encoding of the image embedding grid: `[1, C, h, w]`.
    pub fn get_dense_pe(&self) -> Tensor<B, 4> {
        self.pe_layer.forward(self.image_embedding_size).unsqueeze()
    }

    /// Embeds the prompts.
    ///
    /// * `points`: coords `[B, N, 2]` and labels `[B, N]`; a padding point (label −1) is appended
    ///   when `boxes` is `None`, as upstream.
    /// * `boxes`: `[B, 4]` as (x0, y0, x1, y1) in input pixels; their corners follow the points.
    /// * `masks`: `[B, 1, 4h, 4w]` low-resolution mask logits.
    ///
    /// Returns sparse `[B, N_sparse, C]` and dense `[B, C, h, w]` embeddings. With no points and
    /// no boxes the sparse tensor has zero tokens. SAM2 itself passes boxes as points with labels
    /// (2, 3) placed first, so the padding point is then always present.
    ///
    /// Precision, by construction: every float input is cast to [`Self::dtype`] here, and every
    /// tensor made inside (the padding point, the empty sparse tensor) is made in that dtype, so
    /// prompts of any float dtype work with weights of any dtype (f32, f64, bf16, f16, or f32
    /// master weights under mixed precision) and the outputs are in the weights' dtype.
    pub fn forward(
        &self,
        points: Option<&PointPrompts<B>>,
        boxes: Option<Tensor<B, 2>>,
        masks: Option<Tensor<B, 4>>,
    ) -> Result<PromptEmbeddings<B>, Sam2Error> {
        let batch = self.batch_size(points, boxes.as_ref(), masks.as_ref())?;
        let dtype = self.dtype();
        let boxes = boxes.map(|b| b.cast(dtype));
        let masks = masks.map(|m| m.cast(dtype));
        let mut sparse = Vec::new();
        if let Some(points) = points {
            sparse.push(self.embed_points(points, boxes.is_none()));
        }
        if let Some(boxes) = boxes {
            sparse.push(self.embed_boxes(boxes));
        }
        let device = self.no_mask_embed.weight.device();
        let sparse = if sparse.is_empty() {
            // Upstream's `torch.empty((bs, 0, C))`: no tokens, in the embeddings' dtype so that
            // it concatenates with the decoder's tokens in any precision.
            Tensor::zeros([batch, 0, self.embed_dim], (&device, self.dtype()))
        } else {
            Tensor::cat(sparse, 1)
        };
        let [h, w] = self.image_embedding_size;
        let dense = match masks {
            Some(masks) => self.embed_masks(masks),
            None => self
                .no_mask_embed
                .weight
                .val()
                .reshape([1, self.embed_dim, 1, 1])
                .expand([batch, self.embed_dim, h, w]),
        };
        Ok(PromptEmbeddings { sparse, dense })
    }

    /// Checks prompt shapes and returns the batch size (1 when there is no prompt at all).
    fn batch_size(
        &self,
        points: Option<&PointPrompts<B>>,
        boxes: Option<&Tensor<B, 2>>,
        masks: Option<&Tensor<B, 4>>,
    ) -> Result<usize, Sam2Error> {
        let mut batch: Option<(usize, &'static str)> = None;
        let mut agree = |n: usize, what: &'static str| match batch {
            Some((m, first)) if m != n => Err(Sam2Error::prompt(format!(
                "{what} have batch size {n} but {first} have {m}"
            ))),
            _ => {
                batch.get_or_insert((n, what));
                Ok(())
            }
        };
        if let Some(points) = points {
            let [b, n, xy] = points.coords.dims();
            let labels = points.labels.dims();
            if xy != 2 || labels != [b, n] {
                return Err(Sam2Error::prompt(format!(
                    "points must be coords [B, N, 2] with labels [B, N]; got coords {:?} and labels {labels:?}",
                    [b, n, xy]
                )));
            }
            agree(b, "points")?;
        }
        if let Some(boxes) = boxes {
            let [b, four] = boxes.dims();
            if four != 4 {
                return Err(Sam2Error::prompt(format!(
                    "boxes must be [B, 4] (x0, y0, x1, y1); got {:?}",
                    [b, four]
                )));
            }
            agree(b, "boxes")?;
        }
        if let Some(masks) = masks {
            let [b, c, h, w] = masks.dims();
            let [mh, mw] = self.mask_input_size();
            if c != 1 || [h, w] != [mh, mw] {
                return Err(Sam2Error::prompt(format!(
                    "mask prompts must be [B, 1, {mh}, {mw}] (4× the image embedding); got {:?}",
                    [b, c, h, w]
                )));
            }
            agree(b, "mask prompts")?;
        }
        Ok(batch.map_or(1, |(n, _)| n))
    }

    /// `[B, N, 2]`, `[B, N]` -> `[B, N (+1), C]`
    fn embed_points(&self, points: &PointPrompts<B>, pad: bool) -> Tensor<B, 3> {
        // Pixel centres: the official encoder shifts every point by half a pixel.
        let mut coords = points.coords.clone().cast(self.dtype()) + 0.5;
        let mut labels = points.labels.clone();
        if pad {
            let [b, _, _] = coords.dims();
            let device = coords.device();
            let dtype = coords.dtype();
            coords = Tensor::cat(vec![coords, Tensor::zeros([b, 1, 2], (&device, dtype))], 1);
            labels = Tensor::cat(vec![labels, Tensor::full([b, 1], -1, &device)], 1);
        }
        let embedding = self
            .pe_layer
            .forward_with_coords(coords, self.input_image_size);
        let [b, n, c] = embedding.dims();
        let labels = labels.unsqueeze_dim::<3>(2).expand([b, n, c]);
        let weight = |e: &Embedding<B>| e.weight.val().reshape([1, 1, c]).expand([b, n, c]);
        // Same chain of `where`s as upstream, so every embedding is in the graph (zero gradient
        // where unused) exactly as in PyTorch.
        let mut out = embedding.mask_where(
            labels.clone().equal_elem(-1),
            weight(&self.not_a_point_embed),
        );
        for (label, point_embedding) in self.point_embeddings.iter().enumerate() {
            let selected = labels.clone().equal_elem(label as i64);
            out = out
                .clone()
                .mask_where(selected, out + weight(point_embedding));
        }
        out
    }

    /// `[B, 4]` -> `[B, 2, C]`
    fn embed_boxes(&self, boxes: Tensor<B, 2>) -> Tensor<B, 3> {
        let [b, _] = boxes.dims();
        let corners = (boxes + 0.5).reshape([b, 2, 2]);
        let embedding = self
            .pe_layer
            .forward_with_coords(corners, self.input_image_size);
        let corner_embeddings = Tensor::cat(
            vec![
                self.point_embeddings[2].weight.val(),
                self.point_embeddings[3].weight.val(),
            ],
            0,
        );
        embedding + corner_embeddings.unsqueeze()
    }

    /// `[B, 1, 4h, 4w]` -> `[B, C, h, w]`
    fn embed_masks(&self, masks: Tensor<B, 4>) -> Tensor<B, 4> {
        // The GELUs through `kernels::gelu` (PyTorch's CPU erf, our gradient), not `Gelu::forward`.
        let (conv0, norm1, _, conv3, norm4, _, conv6) = &self.mask_downscaling;
        let x = gelu(norm1.forward(conv0.forward(masks)));
        let x = gelu(norm4.forward(conv3.forward(x)));
        conv6.forward(x)
    }
}

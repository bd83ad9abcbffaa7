//! SAM 2's memory encoder (`sam2/modeling/memory_encoder.py`): a frame's features and its
//! predicted mask become a memory. The mask is downsampled to the feature map by strided
//! convolutions, added to the projected features, mixed by ConvNeXt blocks (the "fuser") and
//! projected to `mem_dim` channels; the memory's position encoding is the sine encoding.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::Gelu;
use burn::nn::PaddingConfig2d;
use burn::tensor::{backend::Backend, Tensor};

use segburn_kernels::gelu;

use crate::nn::conv2d_as_configured;
use crate::sam2::layer_norm2d::{LayerNorm2d, LayerNorm2dConfig};
use crate::sam2::linear::{Linear, LinearConfig};
use crate::sam2::neck::sine_position_encoding;

/// Configuration of a [`MaskDownSampler`] (the official yaml's: 3×3, stride 2, padding 1).
#[derive(Config, Debug)]
pub struct MaskDownSamplerConfig {
    /// Output channels (the image model's width).
    pub embed_dim: usize,
    /// Kernel of each strided convolution.
    #[config(default = 3)]
    pub kernel_size: usize,
    /// Stride of each; the channels grow by `stride²` per stage.
    #[config(default = 2)]
    pub stride: usize,
    /// Padding of each.
    #[config(default = 1)]
    pub padding: usize,
    /// The whole downsampling factor: the image size over the feature map's (16).
    #[config(default = 16)]
    pub total_stride: usize,
}

/// An entry of the official `nn.Sequential`: its position is the key's index (`encoder.3`),
/// the variant adds nothing to the key.
#[derive(Module, Debug)]
pub enum SequentialEntry<B: Backend> {
    /// A convolution.
    Conv(Conv2d<B>),
    /// A per-pixel channel norm.
    Norm(LayerNorm2d<B>),
    /// Exact GELU (no parameters).
    Gelu(Gelu),
}

/// `(conv → LayerNorm2d → GELU)` per stage, then a 1×1 convolution to `embed_dim`.
#[derive(Module, Debug)]
pub struct MaskDownSampler<B: Backend> {
    /// `encoder.{i}` in the official state dict.
    pub encoder: Vec<SequentialEntry<B>>,
}

impl MaskDownSamplerConfig {
    /// Stages of `stride`: `log_stride(total_stride)`, when that is a whole number.
    pub fn stages(&self) -> Option<usize> {
        let mut remaining = self.total_stride;
        let mut stages = 0;
        while remaining > 1 && self.stride > 1 && remaining.is_multiple_of(self.stride) {
            remaining /= self.stride;
            stages += 1;
        }
        (remaining == 1 && stages > 0).then_some(stages)
    }

    /// Builds the downsampler; `stages()` must be `Some` (checked by
    /// [`super::VideoMemoryConfig::check`]).
    pub fn init<B: Backend>(&self, device: &B::Device) -> MaskDownSampler<B> {
        let mut encoder = Vec::new();
        let mut channels = 1;
        for _ in 0..self.stages().unwrap_or(1) {
            let out = channels * self.stride * self.stride;
            let kernel = [self.kernel_size, self.kernel_size];
            let conv = Conv2dConfig::new([channels, out], kernel)
                .with_stride([self.stride, self.stride])
                .with_padding(PaddingConfig2d::Explicit(
                    self.padding,
                    self.padding,
                    self.padding,
                    self.padding,
                ))
                .init(device);
            encoder.push(SequentialEntry::Conv(conv));
            encoder.push(SequentialEntry::Norm(
                LayerNorm2dConfig::new(out).init(device),
            ));
            encoder.push(SequentialEntry::Gelu(Gelu::new()));
            channels = out;
        }
        let last = Conv2dConfig::new([channels, self.embed_dim], [1, 1]).init(device);
        encoder.push(SequentialEntry::Conv(last));
        MaskDownSampler { encoder }
    }
}

impl<B: Backend> MaskDownSampler<B> {
    /// `[N, 1, H, W]` -> `[N, embed_dim, H/total_stride, W/total_stride]`
    pub fn forward(&self, masks: Tensor<B, 4>) -> Tensor<B, 4> {
        self.encoder.iter().fold(masks, |x, entry| match entry {
            SequentialEntry::Conv(conv) => conv2d_as_configured(conv, x),
            SequentialEntry::Norm(norm) => norm.forward(x),
            // PyTorch's erf GELU, as everywhere in SAM2 (`kernels::gelu`).
            SequentialEntry::Gelu(_) => gelu(x),
        })
    }
}

/// A ConvNeXt block (`CXBlock`): depthwise 7×7, channel norm, pointwise MLP ×4, layer scale,
/// residual.
#[derive(Module, Debug)]
pub struct CxBlock<B: Backend> {
    /// Depthwise convolution.
    pub dwconv: Conv2d<B>,
    /// `LayerNorm2d(eps 1e-6)`.
    pub norm: LayerNorm2d<B>,
    /// `dim -> 4·dim`, on channels-last pixels.
    pub pwconv1: Linear<B>,
    /// `4·dim -> dim`.
    pub pwconv2: Linear<B>,
    /// Layer scale `[dim]` (1e-6 at initialisation).
    pub gamma: Param<Tensor<B, 1>>,
}

impl<B: Backend> CxBlock<B> {
    fn new(dim: usize, device: &B::Device) -> Self {
        Self {
            dwconv: Conv2dConfig::new([dim, dim], [7, 7])
                .with_padding(PaddingConfig2d::Explicit(3, 3, 3, 3))
                .with_groups(dim)
                .init(device),
            norm: LayerNorm2dConfig::new(dim).init(device),
            pwconv1: LinearConfig::new(dim, 4 * dim).init(device),
            pwconv2: LinearConfig::new(4 * dim, dim).init(device),
            gamma: Param::from_tensor(Tensor::full([dim], 1e-6, device)),
        }
    }

    /// `[N, C, H, W]` -> `[N, C, H, W]`
    pub fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = self
            .norm
            .forward(conv2d_as_configured(&self.dwconv, input.clone()));
        let x = x.permute([0, 2, 3, 1]);
        let x = self.pwconv2.forward(gelu(self.pwconv1.forward(x)));
        let gamma = self.gamma.val().cast(x.dtype()).reshape([1, 1, 1, -1]);
        input + (x * gamma).permute([0, 3, 1, 2])
    }
}

/// The fuser's blocks (`fuser.layers.{i}`; its input projection is the identity upstream).
#[derive(Module, Debug)]
pub struct Fuser<B: Backend> {
    /// The ConvNeXt blocks.
    pub layers: Vec<CxBlock<B>>,
}

/// Configuration of a [`MemoryEncoder`] (the official yaml's values by default).
#[derive(Config, Debug)]
pub struct MemoryEncoderConfig {
    /// Channels of the frame features (`hidden_dim`, 256).
    pub in_dim: usize,
    /// Channels of a memory (`mem_dim`, 64).
    pub out_dim: usize,
    /// The mask path.
    pub mask_downsampler: MaskDownSamplerConfig,
    /// ConvNeXt blocks in the fuser (2).
    #[config(default = 2)]
    pub fuser_layers: usize,
}

/// The memory encoder.
#[derive(Module, Debug)]
pub struct MemoryEncoder<B: Backend> {
    /// The mask path.
    pub mask_downsampler: MaskDownSampler<B>,
    /// 1×1 projection of the frame features.
    pub pix_feat_proj: Conv2d<B>,
    /// ConvNeXt blocks over features + mask.
    pub fuser: Fuser<B>,
    /// 1×1 projection to `out_dim` (absent, the identity, when `out_dim == in_dim`).
    pub out_proj: Option<Conv2d<B>>,
}

impl MemoryEncoderConfig {
    /// What [`super::VideoMemoryConfig::check`] reports about this part.
    pub(crate) fn check(&self) -> Result<(), String> {
        let d = &self.mask_downsampler;
        if d.stages().is_none() {
            return Err(format!(
                "memory_encoder.mask_downsampler: total_stride ({}) must be a power of stride ({})",
                d.total_stride, d.stride
            ));
        }
        if self.out_dim == 0 || !self.out_dim.is_multiple_of(2) {
            return Err(format!(
                "memory_encoder.out_dim ({}) must be a positive even number (sine encoding)",
                self.out_dim
            ));
        }
        Ok(())
    }

    /// Builds the encoder with PyTorch-style default initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> MemoryEncoder<B> {
        let dim = self.in_dim;
        MemoryEncoder {
            mask_downsampler: self.mask_downsampler.init(device),
            pix_feat_proj: Conv2dConfig::new([dim, dim], [1, 1]).init(device),
            fuser: Fuser {
                layers: (0..self.fuser_layers)
                    .map(|_| CxBlock::new(dim, device))
                    .collect(),
            },
            out_proj: (self.out_dim != dim)
                .then(|| Conv2dConfig::new([dim, self.out_dim], [1, 1]).init(device)),
        }
    }
}

/// A memory: features and their position encoding, both `[N, mem_dim, h, w]`.
#[derive(Debug, Clone)]
pub struct Memory<B: Backend> {
    /// `maskmem_features`.
    pub features: Tensor<B, 4>,
    /// `maskmem_pos_enc`.
    pub pos_enc: Tensor<B, 4>,
}

impl<B: Backend> MemoryEncoder<B> {
    /// `pix_feat` `[N, C, h, w]` and `masks` `[N, 1, 16h, 16w]`, already scaled as the memory
    /// encoder's input (`skip_mask_sigmoid=True` upstream) -> the memory.
    pub fn forward(&self, pix_feat: Tensor<B, 4>, masks: Tensor<B, 4>) -> Memory<B> {
        let masks = self.mask_downsampler.forward(masks);
        let x = conv2d_as_configured(&self.pix_feat_proj, pix_feat) + masks;
        let x = self
            .fuser
            .layers
            .iter()
            .fold(x, |x, block| block.forward(x));
        let features = match &self.out_proj {
            Some(conv) => conv2d_as_configured(conv, x),
            None => x,
        };
        let [n, c, h, w] = features.dims();
        // The encoding depends on the size only; computed in f32 as upstream, then cast.
        let pos_enc = sine_position_encoding::<B>(c, [h, w], &features.device())
            .cast(features.dtype())
            .unsqueeze::<4>()
            .repeat_dim(0, n);
        Memory { features, pos_enc }
    }
}

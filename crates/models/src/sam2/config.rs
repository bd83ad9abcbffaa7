//! The configuration of a whole [`Sam2`] model: its heads, which image encoder it has (if any),
//! the official presets and the checks that the sizes agree.

use burn::config::Config;
use burn::module::Initializer;
use burn::tensor::backend::Backend;

use super::video::VideoMemoryConfig;
use super::{
    HieraImageEncoderConfig, HieraSize, ImageEncoderConfig, MaskDecoderConfig, PromptEncoderConfig,
    Sam2, Sam2Error, Sam2ImageEncoder,
};

/// Configuration of the whole model.
#[derive(Config, Debug)]
pub struct Sam2Config {
    /// The prompt encoder.
    pub prompt_encoder: PromptEncoderConfig,
    /// The mask decoder.
    pub mask_decoder: MaskDecoderConfig,
    /// The image encoder; `None` for decoders trained on cached embeddings.
    #[config(default = "None")]
    pub image_encoder: Option<EncoderConfig>,
    /// The video memory; `None` for an image model.
    #[config(default = "None")]
    pub video: Option<VideoMemoryConfig>,
}

/// Which image encoder a [`Sam2Config`] builds.
#[derive(Config, Debug)]
pub enum EncoderConfig {
    /// Our light CNN (no official weights; quick runs from scratch).
    Cnn(ImageEncoderConfig),
    /// SAM 2.1's Hiera trunk + FPN neck (official weights), with `no_mem_embed`.
    Hiera(HieraImageEncoderConfig),
}

impl EncoderConfig {
    /// Channels of the encoder's output levels.
    pub fn d_model(&self) -> usize {
        match self {
            Self::Cnn(config) => config.d_model,
            Self::Hiera(config) => config.neck.d_model,
        }
    }

    /// Builds the encoder.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Sam2ImageEncoder<B> {
        match self {
            Self::Cnn(config) => Sam2ImageEncoder::Cnn(config.init(device)),
            Self::Hiera(config) => Sam2ImageEncoder::Hiera(config.init(device)),
        }
    }
}

impl Sam2Config {
    /// SAM2.1's heads for square `image_size` inputs (1024 upstream; the embedding is 1/16),
    /// with our image encoder.
    pub fn sam2_1(image_size: usize) -> Self {
        let embedding = image_size / 16;
        Self::new(
            PromptEncoderConfig::new([embedding, embedding], [image_size, image_size]),
            MaskDecoderConfig::new(),
        )
        .with_image_encoder(Some(EncoderConfig::Cnn(ImageEncoderConfig::new())))
    }

    /// An official SAM 2.1 image model (`sam2.1_hiera_*.pt`): 1024×1024 input, Hiera encoder,
    /// and the yaml's dynamic multimask fallback for single-mask predictions.
    pub fn sam2_1_hiera(size: HieraSize) -> Self {
        Self::sam2_1_hiera_image(size)
    }

    /// [`Self::sam2_1_hiera`] with the video memory: the whole official `SAM2Base`, every tensor
    /// of `sam2.1_hiera_*.pt`.
    pub fn sam2_1_hiera_video(size: HieraSize) -> Self {
        Self::sam2_1_hiera_image(size).with_video(Some(VideoMemoryConfig::sam2_1(256)))
    }

    fn sam2_1_hiera_image(size: HieraSize) -> Self {
        Self::new(
            PromptEncoderConfig::new([64, 64], [1024, 1024]),
            MaskDecoderConfig::new().with_dynamic_multimask_via_stability(true),
        )
        .with_image_encoder(Some(EncoderConfig::Hiera(
            HieraImageEncoderConfig::official(size),
        )))
    }

    /// Checks the sizes that must agree; configs read from user files should pass this first.
    pub fn check(&self) -> Result<(), Sam2Error> {
        let pe = &self.prompt_encoder;
        let md = &self.mask_decoder;
        let c = md.transformer_dim;
        let fail = |message: String| Err(Sam2Error::Config(message));
        if pe.embed_dim != c {
            return fail(format!(
                "prompt_encoder.embed_dim ({}) must equal mask_decoder.transformer_dim ({c})",
                pe.embed_dim
            ));
        }
        if c == 0 || !c.is_multiple_of(8) {
            return fail(format!(
                "transformer_dim ({c}) must be a positive multiple of 8"
            ));
        }
        let heads = md.transformer.num_heads;
        let rate = md.transformer.attention_downsample_rate.max(1);
        if heads == 0 || !c.is_multiple_of(heads) || !(c / rate).is_multiple_of(heads) {
            return fail(format!(
                "num_heads ({heads}) must divide the attention widths ({c} and {})",
                c / rate
            ));
        }
        if pe.mask_in_chans < 4 || !pe.mask_in_chans.is_multiple_of(4) {
            return fail(format!(
                "mask_in_chans ({}) must be a multiple of 4",
                pe.mask_in_chans
            ));
        }
        let [h, w] = pe.image_embedding_size;
        let [ih, iw] = pe.input_image_size;
        if h == 0 || w == 0 || ih != 16 * h || iw != 16 * w {
            return fail(format!(
                "input_image_size {:?} must be 16 × image_embedding_size {:?}",
                pe.input_image_size, pe.image_embedding_size
            ));
        }
        if let Some(video) = &self.video {
            video.check(c)?;
        }
        if let Some(encoder) = &self.image_encoder {
            if encoder.d_model() != c {
                return fail(format!(
                    "image_encoder.d_model ({}) must equal transformer_dim ({c})",
                    encoder.d_model()
                ));
            }
            if let EncoderConfig::Hiera(hiera) = encoder {
                hiera.check()?;
            }
            if !md.use_high_res_features {
                return fail("the image encoder needs use_high_res_features".to_string());
            }
        }
        Ok(())
    }

    /// Builds the model with PyTorch-style default initialisation.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Sam2<B> {
        let hiera = matches!(self.image_encoder, Some(EncoderConfig::Hiera(_)));
        let c = self.mask_decoder.transformer_dim;
        let model = Sam2 {
            image_encoder: self.image_encoder.as_ref().map(|c| c.init(device)),
            // Official init: trunc_normal(std=0.02).
            no_mem_embed: hiera.then(|| {
                Initializer::Normal {
                    mean: 0.0,
                    std: 0.02,
                }
                .init([1, 1, c], device)
            }),
            ..Sam2::from_heads(
                self.prompt_encoder.init(device),
                self.mask_decoder.init(device),
            )
        };
        match &self.video {
            Some(video) => video.attach(model, device),
            None => model,
        }
    }
}

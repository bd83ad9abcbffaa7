//! `model.image_encoder` of a SAM2 experiment: none (cached embeddings), our light CNN, or
//! SAM 2.1's Hiera (an official size, or any trunk written out):
//!
//! ```ron
//! image_encoder: None,                 // the decoder trains on cached embeddings
//! image_encoder: Some((64, 128, 256)), // our CNN, channels at strides 4, 8, 16
//! image_encoder: Hiera(size: Tiny),    // sam2.1_hiera_tiny.pt; Small, BasePlus, Large
//! image_encoder: Hiera(
//!     size: Custom(embed_dim: 32, num_heads: 1, stages: [1, 2, 3, 1], global_att_blocks: [5],
//!                  window_spec: [8, 4, 14, 7], window_pos_embed_bkg_spatial_size: (7, 7)),
//!     drop_path_rate: 0.1,             // stochastic depth while training (default 0)
//! ),
//! ```
//!
//! The first two forms are those of the older `Option<[usize; 3]>` field, so existing files
//! keep their meaning. Serde's untagged enum tells the forms apart by shape (RON keeps the
//! variant name for untagged content), and its `expecting` text is the error a wrong value gets,
//! at the value's line and column.

use segburn_models::sam2::{
    EncoderConfig, HieraConfig, HieraImageEncoderConfig, HieraSize, ImageEncoderConfig,
};
use serde::{Deserialize, Serialize};

/// Which image encoder the model has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "model.image_encoder: None, Some((c4, c8, c16)) (our CNN), Hiera(size: \
                 Tiny|Small|BasePlus|Large) or Hiera(size: Custom(embed_dim: .., num_heads: .., \
                 stages: [..], global_att_blocks: [..], window_spec: [..], \
                 window_pos_embed_bkg_spatial_size: (h, w)), drop_path_rate: ..)"
)]
pub enum ImageEncoderChoice {
    /// `None` (no encoder) or `Some(channels)`: our CNN's channels at strides 4, 8, 16.
    OptionalCnn(Option<[usize; 3]>),
    /// `Hiera(...)`.
    Hiera(HieraEncoder),
}

/// SAM 2.1's Hiera encoder, written `Hiera(size: .., drop_path_rate: ..)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum HieraEncoder {
    Hiera {
        /// The trunk.
        size: HieraTrunk,
        /// Stochastic depth of the last block while training (linearly less for earlier ones;
        /// the official fine-tune uses 0.1). 0 turns it off.
        #[serde(default)]
        drop_path_rate: f64,
    },
}

/// An official trunk, or one written out (e.g. the reduced model of the test fixtures).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum HieraTrunk {
    Tiny,
    Small,
    BasePlus,
    Large,
    Custom {
        embed_dim: usize,
        num_heads: usize,
        stages: Vec<usize>,
        global_att_blocks: Vec<usize>,
        window_spec: Vec<usize>,
        window_pos_embed_bkg_spatial_size: [usize; 2],
    },
}

impl HieraTrunk {
    /// The trunk's model configuration.
    pub fn config(&self) -> HieraConfig {
        match self {
            Self::Tiny => HieraConfig::tiny(),
            Self::Small => HieraConfig::small(),
            Self::BasePlus => HieraConfig::base_plus(),
            Self::Large => HieraConfig::large(),
            Self::Custom {
                embed_dim,
                num_heads,
                stages,
                global_att_blocks,
                window_spec,
                window_pos_embed_bkg_spatial_size,
            } => HieraConfig::new()
                .with_embed_dim(*embed_dim)
                .with_num_heads(*num_heads)
                .with_stages(stages.clone())
                .with_global_att_blocks(global_att_blocks.clone())
                .with_window_spec(window_spec.clone())
                .with_window_pos_embed_bkg_spatial_size(*window_pos_embed_bkg_spatial_size),
        }
    }

    /// The official size this trunk is, if any.
    pub fn official(size: HieraSize) -> Self {
        match size {
            HieraSize::Tiny => Self::Tiny,
            HieraSize::Small => Self::Small,
            HieraSize::BasePlus => Self::BasePlus,
            HieraSize::Large => Self::Large,
        }
    }
}

impl Default for ImageEncoderChoice {
    fn default() -> Self {
        Self::OptionalCnn(Some([64, 128, 256]))
    }
}

impl ImageEncoderChoice {
    /// No encoder: the decoder reads cached embeddings.
    pub const NONE: Self = Self::OptionalCnn(None);

    /// Our CNN with these channels.
    pub fn cnn(channels: [usize; 3]) -> Self {
        Self::OptionalCnn(Some(channels))
    }

    /// Hiera with `size`, no stochastic depth.
    pub fn hiera(size: HieraTrunk) -> Self {
        Self::Hiera(HieraEncoder::Hiera {
            size,
            drop_path_rate: 0.0,
        })
    }

    /// Whether there is no encoder.
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }

    /// Whether there is an encoder.
    pub fn is_some(&self) -> bool {
        !self.is_none()
    }

    /// Whether the encoder is Hiera.
    pub fn is_hiera(&self) -> bool {
        matches!(self, Self::Hiera(_))
    }

    /// The Hiera trunk's configuration, if the encoder is Hiera.
    pub fn hiera_trunk(&self) -> Option<HieraConfig> {
        match self {
            Self::Hiera(HieraEncoder::Hiera { size, .. }) => Some(size.config()),
            Self::OptionalCnn(_) => None,
        }
    }

    /// Stochastic depth of the last Hiera block while training (0 for other encoders).
    pub fn drop_path_rate(&self) -> f64 {
        match self {
            Self::Hiera(HieraEncoder::Hiera { drop_path_rate, .. }) => *drop_path_rate,
            Self::OptionalCnn(_) => 0.0,
        }
    }

    /// The model's encoder configuration with `d_model`-channel outputs.
    pub fn encoder_config(&self, d_model: usize) -> Option<EncoderConfig> {
        match self {
            Self::OptionalCnn(channels) => channels.map(|channels| {
                EncoderConfig::Cnn(
                    ImageEncoderConfig::new()
                        .with_channels(channels)
                        .with_d_model(d_model),
                )
            }),
            Self::Hiera(HieraEncoder::Hiera { size, .. }) => Some(EncoderConfig::Hiera(
                HieraImageEncoderConfig::with_d_model(size.config(), d_model),
            )),
        }
    }

    /// Rejects values that cannot work, naming the field (the trunk itself is checked with
    /// the whole model).
    pub fn check(&self) -> Result<(), String> {
        match self {
            Self::OptionalCnn(Some(channels)) if channels.iter().any(|&c| c < 2 || c % 2 != 0) => {
                Err(format!(
                    "model.image_encoder: channels {channels:?} must be even and at least 2"
                ))
            }
            Self::Hiera(HieraEncoder::Hiera { drop_path_rate, .. })
                if !(0.0..1.0).contains(drop_path_rate) =>
            {
                Err(format!(
                    "model.image_encoder.drop_path_rate: {drop_path_rate} must be in [0, 1)"
                ))
            }
            _ => Ok(()),
        }
    }
}

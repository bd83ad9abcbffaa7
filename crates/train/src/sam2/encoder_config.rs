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
//! keep their meaning. The forms are told apart by shape (`None`, `Some(tuple)`, a struct):
//! RON drops the names of structs read without a known type, so `Hiera` is recognised by its
//! fields, and a wrong field or size gets serde's error at its line and column.

use segburn_models::sam2::{
    EncoderConfig, HieraConfig, HieraImageEncoderConfig, HieraSize, ImageEncoderConfig,
};
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeStructVariant;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::config_error::Sam2ConfigError;

/// Which image encoder the model has.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageEncoderChoice {
    /// No encoder: the decoder trains on cached embeddings.
    None,
    /// Our CNN with these channels at strides 4, 8, 16.
    Cnn([usize; 3]),
    /// SAM 2.1's Hiera.
    Hiera {
        /// The trunk.
        size: HieraTrunk,
        /// Stochastic depth of the last block while training (linearly less for earlier ones;
        /// the official fine-tune uses 0.1). 0 turns it off.
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
        Self::Cnn([64, 128, 256])
    }
}

const EXPECTING: &str = "model.image_encoder: None, Some((c4, c8, c16)) (our CNN), Hiera(size: \
     Tiny|Small|BasePlus|Large) or Hiera(size: Custom(embed_dim: .., num_heads: .., stages: [..], \
     global_att_blocks: [..], window_spec: [..], window_pos_embed_bkg_spatial_size: (h, w)), \
     drop_path_rate: ..)";

impl Serialize for ImageEncoderChoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::None => serializer.serialize_none(),
            Self::Cnn(channels) => serializer.serialize_some(channels),
            Self::Hiera {
                size,
                drop_path_rate,
            } => {
                let mut fields =
                    serializer.serialize_struct_variant("ImageEncoderChoice", 2, "Hiera", 2)?;
                fields.serialize_field("size", size)?;
                fields.serialize_field("drop_path_rate", drop_path_rate)?;
                fields.end()
            }
        }
    }
}

/// `Hiera`'s fields as JSON holds them (`{"Hiera": {...}}`, from `--set` overrides).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HieraFields {
    size: HieraTrunk,
    #[serde(default)]
    drop_path_rate: f64,
}

struct ChoiceVisitor {
    /// Whether a unit value means `None`: JSON's `null` (the `--set` path) does, while RON
    /// reads a bare identifier (`Cnn`, `Tiny`) as a unit, which must not.
    unit_is_none: bool,
}

impl<'de> Visitor<'de> for ChoiceVisitor {
    type Value = ImageEncoderChoice;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(EXPECTING)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(ImageEncoderChoice::None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        if self.unit_is_none {
            Ok(ImageEncoderChoice::None)
        } else {
            Err(E::invalid_type(de::Unexpected::Unit, &self))
        }
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        match value {
            "None" => Ok(ImageEncoderChoice::None),
            _ => Err(E::invalid_value(de::Unexpected::Str(value), &self)),
        }
    }

    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
        <[usize; 3]>::deserialize(inner).map(ImageEncoderChoice::Cnn)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        <[usize; 3]>::deserialize(de::value::SeqAccessDeserializer::new(seq))
            .map(ImageEncoderChoice::Cnn)
    }

    /// RON's `Hiera(size: .., ..)` arrives as its fields; JSON's as `{"Hiera": {..}}`.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        const FIELDS: &[&str] = &["size", "drop_path_rate"];
        let (mut size, mut drop_path_rate) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "Hiera" => {
                    let fields: HieraFields = map.next_value()?;
                    return Ok(ImageEncoderChoice::Hiera {
                        size: fields.size,
                        drop_path_rate: fields.drop_path_rate,
                    });
                }
                "size" => size = Some(map.next_value::<HieraTrunk>()?),
                "drop_path_rate" => drop_path_rate = Some(map.next_value::<f64>()?),
                other => return Err(de::Error::unknown_field(other, FIELDS)),
            }
        }
        Ok(ImageEncoderChoice::Hiera {
            size: size.ok_or_else(|| de::Error::missing_field("size"))?,
            drop_path_rate: drop_path_rate.unwrap_or(0.0),
        })
    }
}

impl<'de> Deserialize<'de> for ImageEncoderChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // RON's `None` is `visit_none`; its units are bare identifiers (see `unit_is_none`).
        let is_ron = std::any::type_name::<D>().contains("ron::de::");
        deserializer.deserialize_any(ChoiceVisitor {
            unit_is_none: !is_ron,
        })
    }
}

impl ImageEncoderChoice {
    /// No encoder: the decoder reads cached embeddings.
    pub const NONE: Self = Self::None;

    /// Our CNN with these channels.
    pub fn cnn(channels: [usize; 3]) -> Self {
        Self::Cnn(channels)
    }

    /// Hiera with `size`, no stochastic depth.
    pub fn hiera(size: HieraTrunk) -> Self {
        Self::Hiera {
            size,
            drop_path_rate: 0.0,
        }
    }

    /// Whether there is no encoder.
    pub fn is_none(&self) -> bool {
        matches!(self, Self::None)
    }

    /// Whether there is an encoder.
    pub fn is_some(&self) -> bool {
        !self.is_none()
    }

    /// Whether the encoder is Hiera.
    pub fn is_hiera(&self) -> bool {
        matches!(self, Self::Hiera { .. })
    }

    /// The Hiera trunk's configuration, if the encoder is Hiera.
    pub fn hiera_trunk(&self) -> Option<HieraConfig> {
        match self {
            Self::Hiera { size, .. } => Some(size.config()),
            _ => None,
        }
    }

    /// Stochastic depth of the last Hiera block while training (0 for other encoders).
    pub fn drop_path_rate(&self) -> f64 {
        match self {
            Self::Hiera { drop_path_rate, .. } => *drop_path_rate,
            _ => 0.0,
        }
    }

    /// The model's encoder configuration with `d_model`-channel outputs.
    pub fn encoder_config(&self, d_model: usize) -> Option<EncoderConfig> {
        match self {
            Self::None => None,
            Self::Cnn(channels) => Some(EncoderConfig::Cnn(
                ImageEncoderConfig::new()
                    .with_channels(*channels)
                    .with_d_model(d_model),
            )),
            Self::Hiera { size, .. } => Some(EncoderConfig::Hiera(
                HieraImageEncoderConfig::with_d_model(size.config(), d_model),
            )),
        }
    }

    /// Rejects values that cannot work, naming the field (the trunk itself is checked with
    /// the whole model).
    pub fn check(&self) -> Result<(), Sam2ConfigError> {
        match self {
            Self::Cnn(channels) if channels.iter().any(|&c| c < 2 || c % 2 != 0) => {
                Err(Sam2ConfigError::CnnChannels(*channels))
            }
            Self::Hiera { drop_path_rate, .. } if !(0.0..1.0).contains(drop_path_rate) => {
                Err(Sam2ConfigError::DropPathRate(*drop_path_rate))
            }
            _ => Ok(()),
        }
    }
}

/// The reduced trunk of the SAM 2.1 fixtures (`fixtures/sam2_hiera/`): embed_dim 32, stages
/// [1, 2, 3, 1], global block 5.
#[cfg(test)]
pub(crate) fn reduced_fixture_encoder(drop_path_rate: f64) -> ImageEncoderChoice {
    ImageEncoderChoice::Hiera {
        size: HieraTrunk::Custom {
            embed_dim: 32,
            num_heads: 1,
            stages: vec![1, 2, 3, 1],
            global_att_blocks: vec![5],
            window_spec: vec![8, 4, 14, 7],
            window_pos_embed_bkg_spatial_size: [7, 7],
        },
        drop_path_rate,
    }
}

#[cfg(test)]
#[path = "encoder_config_tests.rs"]
mod tests;

//! The learning rate of each parameter of a SAM2 model relative to `train.lr`, as SAM 2.1's
//! fine-tuning recipe sets it (`reference/sam2-hiera-spec.md` §6, `training/optimizer.py`):
//!
//! * the heads (prompt encoder, mask decoder, `no_mem_embed`): 1;
//! * `image_encoder.*`: `model.image_encoder_lr_mult` (vision_lr / base_lr);
//! * on top of that, with `model.image_encoder_layer_decay` d on a Hiera trunk of n blocks
//!   (L = n + 1): `trunk.blocks.k.*` × d^(L − (k + 1)), `trunk.patch_embed.*` × d^L, and both
//!   position embeddings × 1 (the recipe's `*pos_embed*` override).

use super::config::Sam2ModelConfig;
use super::config_error::Sam2ConfigError;

const ENCODER_PREFIX: &str = "image_encoder.";

/// Per-parameter learning-rate multipliers.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderLrScales {
    encoder_mult: f64,
    /// (decay, blocks of the trunk), with layer-wise decay on a Hiera trunk.
    layer_decay: Option<(f64, usize)>,
}

impl EncoderLrScales {
    /// The scales a run's configuration asks for; layer-wise decay needs a Hiera trunk.
    pub fn new(model: &Sam2ModelConfig) -> Result<Self, Sam2ConfigError> {
        let layer_decay = match (
            model.image_encoder_layer_decay,
            model.image_encoder.hiera_trunk(),
        ) {
            (None, _) => None,
            (Some(decay), Some(trunk)) => Some((decay, trunk.stages.iter().sum())),
            (Some(_), None) => return Err(Sam2ConfigError::LayerDecayWithoutHiera),
        };
        Ok(Self {
            encoder_mult: model.image_encoder_lr_mult,
            layer_decay,
        })
    }

    /// Whether every parameter trains at `train.lr` (times its group's multiplier).
    pub fn is_uniform(&self) -> bool {
        self.encoder_mult == 1.0 && self.layer_decay.is_none()
    }

    /// The multiplier of the parameter with official key `key`.
    pub fn scale(&self, key: &str) -> f64 {
        let Some(encoder_key) = key.strip_prefix(ENCODER_PREFIX) else {
            return 1.0;
        };
        let mult = self.encoder_mult;
        let (Some((decay, blocks)), Some(trunk_key)) =
            (self.layer_decay, encoder_key.strip_prefix("trunk."))
        else {
            return mult;
        };
        let layers = blocks + 1;
        let layer_id = if trunk_key.contains("pos_embed") {
            return mult;
        } else if trunk_key.starts_with("patch_embed.") {
            0
        } else if let Some(block) = trunk_key
            .strip_prefix("blocks.")
            .and_then(|rest| rest.split('.').next())
            .and_then(|index| index.parse::<usize>().ok())
        {
            block + 1
        } else {
            layers
        };
        mult * decay.powi((layers - layer_id.min(layers)) as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sam2::encoder_config::{HieraTrunk, ImageEncoderChoice};

    fn model(encoder: ImageEncoderChoice, decay: Option<f64>) -> Sam2ModelConfig {
        Sam2ModelConfig {
            image_encoder: encoder,
            image_encoder_lr_mult: 0.6,
            image_encoder_layer_decay: decay,
            ..Sam2ModelConfig::default()
        }
    }

    #[test]
    fn the_recipe_scales_of_hiera_t() {
        let hiera = model(ImageEncoderChoice::hiera(HieraTrunk::Tiny), Some(0.9));
        let scales = EncoderLrScales::new(&hiera).expect("Hiera");
        // Hiera-T: 12 blocks, L = 13.
        let close = |key: &str, expected: f64| {
            let got = scales.scale(key);
            assert!((got - expected).abs() < 1e-12, "{key}: {got} vs {expected}");
        };
        close("sam_mask_decoder.conv_s0.weight", 1.0);
        close("no_mem_embed", 1.0);
        close("image_encoder.neck.convs.0.conv.weight", 0.6);
        close("image_encoder.trunk.pos_embed", 0.6);
        close("image_encoder.trunk.pos_embed_window", 0.6);
        close(
            "image_encoder.trunk.patch_embed.proj.weight",
            0.6 * 0.9f64.powi(13),
        );
        close(
            "image_encoder.trunk.blocks.0.norm1.weight",
            0.6 * 0.9f64.powi(12),
        );
        close("image_encoder.trunk.blocks.11.mlp.layers.1.bias", 0.6 * 0.9);
        close("image_encoder.trunk.blocks.10.attn.qkv.weight", 0.6 * 0.81);

        let cnn = ImageEncoderChoice::cnn([16, 32, 64]);
        let error = EncoderLrScales::new(&model(cnn.clone(), Some(0.9)))
            .expect_err("CNN has no blocks")
            .to_string();
        assert!(error.contains("model.image_encoder_layer_decay"), "{error}");
        let plain = EncoderLrScales::new(&Sam2ModelConfig {
            image_encoder: cnn,
            ..Sam2ModelConfig::default()
        })
        .expect("no decay");
        assert!(plain.is_uniform());
        assert_eq!(plain.scale("image_encoder.stem.0.conv.weight"), 1.0);
    }
}

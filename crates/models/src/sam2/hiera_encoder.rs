//! SAM 2.1's image encoder: the [`Hiera`] trunk and the [`FpnNeck`], with `scalp = 1` (the
//! stride-32 level feeds the top-down path, then is dropped).
//!
//! Keys: `image_encoder.trunk.*` and `image_encoder.neck.convs.*`, as in the official
//! checkpoints `sam2.1_hiera_{tiny,small,base_plus,large}.pt`.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{backend::Backend, Tensor};

use super::hiera::drop_path::DropPath;
use super::hiera::{Hiera, HieraConfig};
use super::image_encoder::BackboneFeatures;
use super::neck::{FpnNeck, FpnNeckConfig};
use super::Sam2Error;

/// The four official model sizes.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum HieraSize {
    /// `sam2.1_hiera_tiny.pt`.
    Tiny,
    /// `sam2.1_hiera_small.pt`.
    Small,
    /// `sam2.1_hiera_base_plus.pt`.
    BasePlus,
    /// `sam2.1_hiera_large.pt`.
    Large,
}

/// Configuration of a [`HieraImageEncoder`].
#[derive(Config, Debug)]
pub struct HieraImageEncoderConfig {
    /// The trunk.
    pub trunk: HieraConfig,
    /// The neck; its `backbone_channel_list` must be the trunk's stage widths reversed.
    pub neck: FpnNeckConfig,
}

impl HieraImageEncoderConfig {
    /// The encoder of an official SAM 2.1 model (`d_model` 256).
    pub fn official(size: HieraSize) -> Self {
        let trunk = match size {
            HieraSize::Tiny => HieraConfig::tiny(),
            HieraSize::Small => HieraConfig::small(),
            HieraSize::BasePlus => HieraConfig::base_plus(),
            HieraSize::Large => HieraConfig::large(),
        };
        Self::with_d_model(trunk, 256)
    }

    /// A trunk and a neck of `d_model` channels that fits it.
    pub fn with_d_model(trunk: HieraConfig, d_model: usize) -> Self {
        let mut channels = trunk.stage_dims();
        channels.reverse();
        Self::new(trunk, FpnNeckConfig::new(channels).with_d_model(d_model))
    }

    /// Checks the trunk and that the neck fits it.
    pub fn check(&self) -> Result<(), Sam2Error> {
        self.trunk.check()?;
        let mut expected = self.trunk.stage_dims();
        expected.reverse();
        if self.neck.backbone_channel_list != expected {
            return Err(Sam2Error::Config(format!(
                "neck.backbone_channel_list {:?} must be the trunk's stage widths reversed ({expected:?})",
                self.neck.backbone_channel_list
            )));
        }
        if expected.len() < 3 {
            return Err(Sam2Error::Config(format!(
                "the SAM2 heads need 3 feature levels; the trunk has {} stages",
                expected.len()
            )));
        }
        Ok(())
    }

    /// Builds the encoder.
    pub fn init<B: Backend>(&self, device: &B::Device) -> HieraImageEncoder<B> {
        HieraImageEncoder {
            trunk: self.trunk.init(device),
            neck: self.neck.init(device),
        }
    }
}

/// Hiera trunk + FPN neck.
#[derive(Module, Debug)]
pub struct HieraImageEncoder<B: Backend> {
    /// The Hiera trunk.
    pub trunk: Hiera<B>,
    /// The FPN neck.
    pub neck: FpnNeck<B>,
}

impl<B: Backend> HieraImageEncoder<B> {
    /// The neck's levels, all of them (stride 4 first; the last one is dropped by SAM 2.1).
    pub fn forward_levels(&self, images: Tensor<B, 4>) -> Result<Vec<Tensor<B, 4>>, Sam2Error> {
        self.levels(images, None)
    }

    /// `[N, 3, H, W]` (normalised RGB, H and W multiples of 32) -> the `d_model`-channel
    /// levels at strides 4, 8 and 16 (`backbone_fpn` of the official encoder).
    pub fn forward(&self, images: Tensor<B, 4>) -> Result<BackboneFeatures<B>, Sam2Error> {
        self.forward_with(images, None)
    }

    /// [`Self::forward`], with stochastic depth in the trunk when `drop_path` is given.
    pub fn forward_with(
        &self,
        images: Tensor<B, 4>,
        drop_path: Option<&DropPath>,
    ) -> Result<BackboneFeatures<B>, Sam2Error> {
        let mut levels = self.levels(images, drop_path)?.into_iter();
        let mut next = || {
            levels
                .next()
                .ok_or_else(|| Sam2Error::shape("the neck returned fewer than 3 levels"))
        };
        Ok(BackboneFeatures {
            stride4: next()?,
            stride8: next()?,
            stride16: next()?,
        })
    }

    /// Trunk then neck: every level, stride 4 first.
    fn levels(
        &self,
        images: Tensor<B, 4>,
        drop_path: Option<&DropPath>,
    ) -> Result<Vec<Tensor<B, 4>>, Sam2Error> {
        Ok(self
            .neck
            .forward(self.trunk.forward_with(images, drop_path)?))
    }
}

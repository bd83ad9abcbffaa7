//! PIDNet sizes and their hyper-parameters (official `get_seg_model` presets).

use burn::config::Config;
use serde::{Deserialize, Serialize};

/// The three published sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PidNetSize {
    S,
    M,
    L,
}

/// Width and depth of one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidNetPreset {
    /// Blocks in layer1/2 and in the P/D branch layers.
    pub m: usize,
    /// Blocks in layer3/4.
    pub n: usize,
    /// Base width C.
    pub planes: usize,
    pub ppm_planes: usize,
    pub head_planes: usize,
}

impl PidNetSize {
    pub fn preset(self) -> PidNetPreset {
        match self {
            PidNetSize::S => PidNetPreset {
                m: 2,
                n: 3,
                planes: 32,
                ppm_planes: 96,
                head_planes: 128,
            },
            PidNetSize::M => PidNetPreset {
                m: 2,
                n: 3,
                planes: 64,
                ppm_planes: 96,
                head_planes: 128,
            },
            PidNetSize::L => PidNetPreset {
                m: 3,
                n: 4,
                planes: 64,
                ppm_planes: 112,
                head_planes: 256,
            },
        }
    }
}

/// Configuration of [`super::PidNet`]: `PidNetConfig::new(PidNetSize::S, 19).init(&device)`.
#[derive(Config, Debug)]
pub struct PidNetConfig {
    pub size: PidNetSize,
    pub num_classes: usize,
    /// Build the auxiliary P and D heads (needed for training; the official `augment=True`).
    #[config(default = true)]
    pub augment: bool,
}

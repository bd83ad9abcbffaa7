//! The configuration of the data layer, embedded as-is in the cli's RON experiment file.
//!
//! Every default lives in the `Default` impls of its types (here and in `augment.rs`,
//! `edges.rs`, `loader.rs`) and mirrors the official PIDNet Cityscapes recipe
//! (`configs/cityscapes/pidnet_small_cityscapes.yaml`) unless a comment says otherwise.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::layout::Layout;

mod augment;
mod edges;
mod loader;

pub use augment::AugmentConfig;
pub use edges::{EdgeConfig, EdgeRule};
pub use loader::{LoaderConfig, ValLoaderConfig};

/// Which side of training a loader serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Shuffled, augmented (scale, pad, crop, flip), `drop_last` as configured.
    Train,
    /// Dataset order, no augmentation, full resolution, every sample.
    Validation,
}

/// Everything the data layer needs: where the data is, which splits, how to augment, how to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataConfig {
    /// Where the dataset is and how it is laid out.
    pub layout: Layout,
    /// The split trained on (`train`; the official trainval runs use `trainval` lists).
    pub train_split: String,
    /// The split validated on.
    pub val_split: String,
    /// The training id of pixels without a class (official `IGNORE_LABEL`).
    pub ignore_index: u8,
    /// Training augmentation and the normalisation shared with validation.
    pub augment: AugmentConfig,
    /// The PIDNet boundary (edge) target.
    pub edges: EdgeConfig,
    /// Turn JPEG photos upright by their EXIF orientation, as `cv2.imread` in the official loader
    /// does (labels are PNG and never rotated, so a label must match the upright image).
    pub exif_orientation: bool,
    /// The training loader.
    pub train_loader: LoaderConfig,
    /// The validation loader (its own type, so that a partly written `val_loader` takes the
    /// validation defaults, not the training ones).
    pub val_loader: ValLoaderConfig,
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            layout: Layout::Cityscapes {
                // The official code's `DATASET.ROOT` + `cityscapes`.
                root: PathBuf::from("data/cityscapes"),
            },
            train_split: "train".to_string(),
            val_split: "val".to_string(),
            ignore_index: 255,
            augment: AugmentConfig::default(),
            edges: EdgeConfig::default(),
            exif_orientation: true,
            train_loader: LoaderConfig::default(),
            val_loader: ValLoaderConfig::default(),
        }
    }
}

impl DataConfig {
    /// The split name and loader configuration of `mode`.
    pub fn split(&self, mode: Mode) -> &str {
        match mode {
            Mode::Train => &self.train_split,
            Mode::Validation => &self.val_split,
        }
    }

    /// How images are read: upright by EXIF or as stored (`exif_orientation`).
    pub fn image_orientation(&self) -> crate::decode::Orientation {
        if self.exif_orientation {
            crate::decode::Orientation::FromExif
        } else {
            crate::decode::Orientation::AsStored
        }
    }

    /// The loader configuration of `mode`; validation always reads every sample once, in
    /// dataset order.
    pub fn loader(&self, mode: Mode) -> LoaderConfig {
        match mode {
            Mode::Train => self.train_loader.clone(),
            Mode::Validation => self.val_loader.loader(),
        }
    }

    /// Rejects values that cannot work, naming the field.
    pub fn check(&self) -> Result<(), DataError> {
        self.augment.check()?;
        self.edges.check()?;
        self.train_loader.check("train_loader")?;
        self.val_loader.check()?;
        for (field, value) in [
            ("train_split", &self.train_split),
            ("val_split", &self.val_split),
        ] {
            if value.is_empty() {
                return Err(DataError::config(field, "the split name is empty"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

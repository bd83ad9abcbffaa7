//! The `data` section of a SAM2 experiment: where the objects come from, which splits, how many
//! objects per image, and optionally where cached image embeddings are.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::components::Connectivity;
use crate::layout::Layout;

/// Where objects come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum ObjectSource {
    /// Every connected component of each class of a semantic-segmentation layout (any of
    /// [`Layout`]'s) is one object.
    SemanticComponents {
        layout: Layout,
        /// Components smaller than this many pixels (of the original label) are dropped.
        #[serde(default = "default_min_area")]
        min_area: usize,
        #[serde(default)]
        connectivity: Connectivity,
        /// Only these class names make objects (`None`: every class).
        #[serde(default)]
        classes: Option<Vec<String>>,
        /// The training id of pixels without a class; they belong to no object.
        #[serde(default = "default_ignore")]
        ignore_index: u8,
    },
    /// `images/<stem>.{png,jpg,jpeg}` with `instances/<stem>.png`: every distinct non-zero value
    /// of the instance map (8- or 16-bit grey, palette index, or RGB colour) is one object.
    InstanceMasks {
        images: PathBuf,
        instances: PathBuf,
        #[serde(default = "default_min_area")]
        min_area: usize,
        /// A value that is no object (VOC's `SegmentationObject` marks boundaries with 255).
        #[serde(default = "default_instance_ignore")]
        ignore_value: Option<u32>,
    },
    /// `images/<stem>.{png,jpg,jpeg}` with a folder `masks/<stem>/` of PNGs, one per object
    /// (non-zero pixels are the object). Objects may overlap.
    ObjectMaskFolders {
        images: PathBuf,
        masks: PathBuf,
        #[serde(default = "default_min_area")]
        min_area: usize,
    },
}

fn default_min_area() -> usize {
    100
}

fn default_ignore() -> u8 {
    255
}

fn default_instance_ignore() -> Option<u32> {
    Some(255)
}

/// The data of a SAM2 run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ObjectDataConfig {
    pub source: ObjectSource,
    pub train_split: String,
    pub val_split: String,
    /// Images per training batch; every sampled object of these images is one prompt set.
    pub batch_size: usize,
    /// At most this many objects are drawn from an image per epoch (SAM2 trains on up to 3
    /// objects per clip); evaluation uses them all, up to `eval_objects_per_image`.
    pub objects_per_image: usize,
    /// Evaluation cap per image (objects in raster order of their first pixel).
    pub eval_objects_per_image: usize,
    /// Mirror images and masks left-right with probability 1/2 (not with cached embeddings).
    pub flip: bool,
    /// Per-channel mean of RGB values in `[0, 1]` (ImageNet).
    pub mean: [f32; 3],
    /// Per-channel standard deviation (ImageNet).
    pub std: [f32; 3],
    /// A folder of cached image embeddings, `<name>.safetensors` per image (`{split}` is
    /// replaced by the split name). With it the images are not decoded.
    pub embeddings: Option<PathBuf>,
    /// A new random image order every epoch.
    pub shuffle: bool,
    /// Batches prepared ahead of the trainer on a background thread (0: load in line).
    pub prefetch: usize,
}

impl Default for ObjectDataConfig {
    fn default() -> Self {
        Self {
            source: ObjectSource::SemanticComponents {
                layout: Layout::Cityscapes {
                    root: PathBuf::from("datasets/sample"),
                },
                min_area: default_min_area(),
                connectivity: Connectivity::Four,
                classes: None,
                ignore_index: default_ignore(),
            },
            train_split: "train".to_string(),
            val_split: "val".to_string(),
            batch_size: 2,
            objects_per_image: 3,
            eval_objects_per_image: 16,
            flip: true,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            embeddings: None,
            shuffle: true,
            prefetch: 2,
        }
    }
}

impl ObjectDataConfig {
    /// Rejects values that cannot work; the error names the field.
    pub fn check(&self) -> Result<(), super::error::ObjectError> {
        let fail = |field: &str, message: String| {
            Err(super::error::ObjectError::Config {
                field: format!("data.{field}"),
                message,
            })
        };
        for (field, value) in [
            ("batch_size", self.batch_size),
            ("objects_per_image", self.objects_per_image),
            ("eval_objects_per_image", self.eval_objects_per_image),
        ] {
            if value == 0 {
                return fail(field, "must be at least 1".to_string());
            }
        }
        for (field, value) in [
            ("train_split", &self.train_split),
            ("val_split", &self.val_split),
        ] {
            if value.is_empty() {
                return fail(field, "the split name is empty".to_string());
            }
        }
        if self.embeddings.is_some() && self.flip {
            return fail(
                "flip",
                "cached embeddings were computed on unflipped images; set flip: false".to_string(),
            );
        }
        for (channel, std) in self.std.iter().enumerate() {
            if !(std.is_finite() && *std > 0.0) {
                return fail(
                    &format!("std[{channel}]"),
                    format!("{std} is not a positive standard deviation"),
                );
            }
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            return fail("mean", "values must be finite".to_string());
        }
        Ok(())
    }
}

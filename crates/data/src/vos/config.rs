//! Where a VOS dataset is (its folders) and how training clips are drawn from it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::VosError;

/// The DAVIS / MOSE / SA-V folder layout:
/// `<root>/<images>/<video>/<frame>.jpg|.png`, `<root>/<annotations>/<video>/<frame>.png` and
/// optional split files `<root>/<split_files>/<split>.txt`, one video name per line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VosLayout {
    pub root: PathBuf,
    /// The frames folder, relative to `root` (DAVIS 2017: `JPEGImages/480p`).
    #[serde(default = "default_images")]
    pub images: PathBuf,
    /// The annotations folder, relative to `root` (DAVIS 2017: `Annotations/480p`).
    #[serde(default = "default_annotations")]
    pub annotations: PathBuf,
    /// The folder of split files, relative to `root`; split `2017/val` is `2017/val.txt` in it.
    #[serde(default = "default_split_files")]
    pub split_files: PathBuf,
}

fn default_images() -> PathBuf {
    PathBuf::from("JPEGImages")
}

fn default_annotations() -> PathBuf {
    PathBuf::from("Annotations")
}

fn default_split_files() -> PathBuf {
    PathBuf::from("ImageSets")
}

impl VosLayout {
    /// The standard folder names under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            images: default_images(),
            annotations: default_annotations(),
            split_files: default_split_files(),
        }
    }

    pub fn images_dir(&self) -> PathBuf {
        self.root.join(&self.images)
    }

    pub fn annotations_dir(&self) -> PathBuf {
        self.root.join(&self.annotations)
    }

    /// `<root>/<split_files>/<split>.txt`.
    pub fn split_file(&self, split: &str) -> PathBuf {
        self.root
            .join(&self.split_files)
            .join(Path::new(&format!("{split}.txt")))
    }
}

impl Default for VosLayout {
    /// The bundled synthetic sample (`cargo xtask make-sample`).
    fn default() -> Self {
        Self::new("datasets/sample_vos")
    }
}

/// How training clips are drawn, as the official SAM 2 `RandomUniformSampler` does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClipConfig {
    /// Consecutive annotated frames per clip (the official SAM 2.1 recipes: 8).
    #[serde(default = "default_num_frames")]
    pub num_frames: usize,
    /// At most this many objects per clip, drawn among those visible in its first frame
    /// (the official recipes: 3).
    #[serde(default = "default_max_num_objects")]
    pub max_num_objects: usize,
    /// The probability of playing a clip backwards (the official default: 0).
    #[serde(default)]
    pub reverse_time_prob: f64,
}

fn default_num_frames() -> usize {
    8
}

fn default_max_num_objects() -> usize {
    3
}

impl Default for ClipConfig {
    fn default() -> Self {
        Self {
            num_frames: default_num_frames(),
            max_num_objects: default_max_num_objects(),
            reverse_time_prob: 0.0,
        }
    }
}

impl ClipConfig {
    /// Refuses values no clip can be drawn with.
    pub fn validate(&self) -> Result<(), VosError> {
        if self.num_frames == 0 {
            return Err(VosError::config(
                "num_frames",
                "a clip needs at least 1 frame",
            ));
        }
        if self.max_num_objects == 0 {
            return Err(VosError::config(
                "max_num_objects",
                "a clip needs at least 1 object",
            ));
        }
        if !(0.0..=1.0).contains(&self.reverse_time_prob) {
            return Err(VosError::config(
                "reverse_time_prob",
                format!(
                    "{} is not a probability (0.0 to 1.0)",
                    self.reverse_time_prob
                ),
            ));
        }
        Ok(())
    }
}

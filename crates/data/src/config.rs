//! The configuration of the data layer, embedded as-is in the cli's RON experiment file.
//!
//! Every default lives in the `Default` impls below and mirrors the official PIDNet Cityscapes
//! recipe (`configs/cityscapes/pidnet_small_cityscapes.yaml`) unless a comment says otherwise.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::layout::Layout;

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

/// The official training augmentation: random scale, pad, random crop, flip, normalisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AugmentConfig {
    /// Long side, in pixels, of an image at scale 1.0 (official `BASE_SIZE`).
    pub base_size: usize,
    /// Crop height (official `IMAGE_SIZE[1]`).
    pub crop_height: usize,
    /// Crop width (official `IMAGE_SIZE[0]`).
    pub crop_width: usize,
    /// Random scaling (official `MULTI_SCALE`). Without it images keep their size.
    pub multi_scale: bool,
    /// The smallest scale factor.
    pub scale_min: f64,
    /// The spacing of the scale factors.
    pub scale_step: f64,
    /// How many scale factors: `scale_min + k * scale_step` for `k` in `0..scale_steps`, drawn
    /// uniformly. The official `0.5 + random.randint(0, 16) / 10` is 17 steps (0.5 ..= 2.1):
    /// Python's `randint` includes its upper bound.
    pub scale_steps: u32,
    /// Horizontal flip with probability 0.5 (official `FLIP`).
    pub flip: bool,
    /// Per-channel mean of RGB values in `[0, 1]` (ImageNet), also used for validation.
    pub mean: [f32; 3],
    /// Per-channel standard deviation (ImageNet), also used for validation.
    pub std: [f32; 3],
}

impl Default for AugmentConfig {
    fn default() -> Self {
        Self {
            base_size: 2048,
            crop_height: 1024,
            crop_width: 1024,
            multi_scale: true,
            scale_min: 0.5,
            scale_step: 0.1,
            scale_steps: 17,
            flip: true,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
        }
    }
}

impl AugmentConfig {
    fn check(&self) -> Result<(), DataError> {
        let positive = [
            ("augment.base_size", self.base_size),
            ("augment.crop_height", self.crop_height),
            ("augment.crop_width", self.crop_width),
            ("augment.scale_steps", self.scale_steps as usize),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(DataError::config(field, "must be at least 1"));
            }
        }
        if !(self.scale_min.is_finite() && self.scale_min > 0.0) {
            return Err(DataError::config(
                "augment.scale_min",
                format!("{} is not a positive scale", self.scale_min),
            ));
        }
        if !(self.scale_step.is_finite() && self.scale_step >= 0.0) {
            return Err(DataError::config(
                "augment.scale_step",
                format!("{} is not a finite, non-negative step", self.scale_step),
            ));
        }
        for (channel, std) in self.std.iter().enumerate() {
            if !(std.is_finite() && *std > 0.0) {
                return Err(DataError::config(
                    format!("augment.std[{channel}]"),
                    format!("{std} is not a positive standard deviation"),
                ));
            }
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            return Err(DataError::config("augment.mean", "values must be finite"));
        }
        Ok(())
    }

    /// Scale factor number `k` (`k < scale_steps`), computed in f64 exactly as Python does
    /// `0.5 + k / 10.0` for the defaults.
    pub fn scale(&self, k: u32) -> f64 {
        if self.scale_step == 0.1 {
            // Division by 10 rather than multiplication by 0.1 keeps the bits of the official
            // `k / 10.0`, so `int(2048 * s + 0.5)` rounds the same way.
            self.scale_min + f64::from(k) / 10.0
        } else {
            self.scale_min + f64::from(k) * self.scale_step
        }
    }
}

/// The boundary target of PIDNet (`gen_sample` in the official `base_dataset.py`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EdgeConfig {
    /// Which pixels are boundary pixels before padding and dilation.
    pub rule: EdgeRule,
    /// Side of the square dilation kernel (official `bd_dilate_size`).
    pub dilation: usize,
    /// Zero the edges within `pad_width` pixels of the border before dilating (official
    /// `edge_pad`: true for Cityscapes, false for CamVid).
    pub pad: bool,
    /// Width of that border (official `y_k_size = x_k_size = 6`).
    pub pad_width: usize,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        Self {
            rule: EdgeRule::Official,
            dilation: 4,
            pad: true,
            pad_width: 6,
        }
    }
}

/// How boundary pixels are found in a label map (`edges.rs` explains both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EdgeRule {
    /// `cv2.Canny(label, 0.1, 0.2)` of the official `gen_sample`, bit for bit.
    Official,
    /// A pixel whose label differs from its right or lower neighbour (segburn's rule before it
    /// matched the official one; it marks every label change and ignores the id values).
    NeighbourDiff,
}

impl EdgeConfig {
    fn check(&self) -> Result<(), DataError> {
        if self.dilation == 0 {
            return Err(DataError::config(
                "edges.dilation",
                "must be at least 1 (1 = no dilation)",
            ));
        }
        Ok(())
    }
}

/// How batches are made and how many threads make them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoaderConfig {
    /// Samples per batch (official global batch: 2 GPUs x 6).
    pub batch_size: usize,
    /// Worker threads; 0 means one per available core.
    pub num_workers: usize,
    /// Finished batches kept ready ahead of the trainer, on top of one per worker in progress.
    pub prefetch: usize,
    /// Drop the last, incomplete batch of an epoch.
    pub drop_last: bool,
    /// Read the samples in a new random order every epoch.
    pub shuffle: bool,
}

impl Default for LoaderConfig {
    fn default() -> Self {
        Self {
            batch_size: 12,
            num_workers: 0,
            prefetch: 2,
            drop_last: true,
            shuffle: true,
        }
    }
}

impl LoaderConfig {
    fn check(&self, name: &str) -> Result<(), DataError> {
        if self.batch_size == 0 {
            return Err(DataError::config(
                format!("{name}.batch_size"),
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// Whether this configuration reads every sample exactly once, in dataset order.
    pub fn reads_every_sample_in_order(&self) -> bool {
        !self.shuffle && !self.drop_last
    }

    /// The number of worker threads this configuration asks for, with 0 resolved to the number
    /// of available cores.
    pub fn resolved_workers(&self) -> usize {
        if self.num_workers > 0 {
            self.num_workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// How validation batches are made. Validation (and `eval`) reads every sample of the split
/// exactly once, in dataset order, so `shuffle` and `drop_last` cannot apply: they are accepted
/// only as `false` (what older experiment files and checkpoints spell out) and refused
/// otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValLoaderConfig {
    /// Samples per batch. Official validation runs batch 6 per GPU at full resolution; batch 1
    /// keeps memory low on one device and allows mixed image sizes.
    pub batch_size: usize,
    /// Worker threads; 0 means one per available core.
    pub num_workers: usize,
    /// Finished batches kept ready ahead of the evaluator, on top of one per worker in progress.
    pub prefetch: usize,
    /// Must be false: the last, incomplete batch is always evaluated.
    pub drop_last: bool,
    /// Must be false: samples are always read in dataset order.
    pub shuffle: bool,
}

impl Default for ValLoaderConfig {
    fn default() -> Self {
        Self {
            batch_size: 1,
            num_workers: 0,
            prefetch: 2,
            drop_last: false,
            shuffle: false,
        }
    }
}

impl ValLoaderConfig {
    fn check(&self) -> Result<(), DataError> {
        let why = "validation reads every sample exactly once, in dataset order; remove the \
                   setting (or set it to false)";
        if self.drop_last {
            return Err(DataError::config("val_loader.drop_last", why));
        }
        if self.shuffle {
            return Err(DataError::config("val_loader.shuffle", why));
        }
        self.loader().check("val_loader")
    }

    /// The loader settings of validation: these sizes, dataset order, every sample.
    pub fn loader(&self) -> LoaderConfig {
        LoaderConfig {
            batch_size: self.batch_size,
            num_workers: self.num_workers,
            prefetch: self.prefetch,
            drop_last: false,
            shuffle: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_scales_are_the_official_ones() {
        let config = AugmentConfig::default();
        let scales: Vec<f64> = (0..config.scale_steps).map(|k| config.scale(k)).collect();
        assert_eq!(scales.len(), 17);
        assert_eq!(scales[0], 0.5);
        assert_eq!(scales[16], 0.5 + 16.0 / 10.0);
        // int(2048 * s + 0.5) of the official code for s = 0.5 + k/10.
        let longs: Vec<usize> = scales.iter().map(|s| (2048.0 * s + 0.5) as usize).collect();
        assert_eq!(longs[0], 1024);
        assert_eq!(longs[5], 2048);
        assert_eq!(longs[16], 4301);
    }

    #[test]
    fn ron_round_trip_and_partial_configs_fill_defaults() {
        let text = r#"(
            layout: FolderPair(images: "a/{split}/img", masks: "a/{split}/mask", classes: ["bg", "fg"]),
            augment: (crop_height: 512, crop_width: 256),
            train_loader: (batch_size: 2),
        )"#;
        let config: DataConfig = ron::from_str(text).expect("valid RON");
        assert_eq!(config.augment.crop_height, 512);
        assert_eq!(config.augment.base_size, 2048);
        assert_eq!(config.train_loader.batch_size, 2);
        assert_eq!(config.val_loader.batch_size, 1);
        assert!(config
            .loader(Mode::Validation)
            .reads_every_sample_in_order());
        assert!(
            matches!(config.layout, Layout::FolderPair { ref classes, .. } if classes.len() == 2)
        );
        let printed = ron::to_string(&config).expect("serialisable");
        let again: DataConfig = ron::from_str(&printed).expect("round trip");
        assert_eq!(again, config);
        config.check().expect("valid values");
    }

    /// A partly written `val_loader` (as `configs/quickstart.ron` has) keeps the validation
    /// defaults for the fields it leaves out, not the training loader's `shuffle`/`drop_last`.
    #[test]
    fn a_partial_val_loader_keeps_the_validation_defaults() {
        let config: DataConfig =
            ron::from_str("(val_loader: (batch_size: 5, num_workers: 2))").expect("valid RON");
        assert_eq!(config.val_loader.batch_size, 5);
        assert!(!config.val_loader.shuffle && !config.val_loader.drop_last);
        let loader = config.loader(Mode::Validation);
        assert!(loader.reads_every_sample_in_order(), "{loader:?}");
        config.check().expect("valid values");
    }

    #[test]
    fn shuffle_or_drop_last_in_validation_is_refused_by_name() {
        for field in ["shuffle", "drop_last"] {
            let text = format!("(val_loader: ({field}: true))");
            let config: DataConfig = ron::from_str(&text).expect("valid RON");
            let error = config.check().expect_err("cannot apply").to_string();
            assert!(error.contains(&format!("val_loader.{field}")), "{error}");
            assert!(error.contains("every sample exactly once"), "{error}");
        }
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_name() {
        let error = ron::from_str::<DataConfig>("(augment: (crop_size: 3))")
            .expect_err("crop_size is not a field");
        assert!(error.to_string().contains("crop_size"), "{error}");
    }

    #[test]
    fn impossible_values_name_their_field() {
        let mut config = DataConfig::default();
        config.augment.std[1] = 0.0;
        let error = config.check().expect_err("zero std").to_string();
        assert!(error.contains("augment.std[1]"), "{error}");
        let mut config = DataConfig::default();
        config.val_loader.batch_size = 0;
        let error = config.check().expect_err("zero batch").to_string();
        assert!(error.contains("val_loader.batch_size"), "{error}");
    }
}

//! One sample from files to normalised tensors-to-be: decode, map labels, edges, augment.

use crate::augment::{render, Geometry, Normaliser, SampleSlot};
use crate::config::{AugmentConfig, DataConfig, EdgeConfig, Mode};
use crate::decode::{read_image_with, read_label, LabelImage, Orientation, RgbImage};
use crate::edges::edge_map;
use crate::error::DataError;
use crate::labels::LabelMap;
use crate::layout::SampleEntry;
use crate::rng::SplitMix64;

/// How samples are turned into training or validation inputs.
#[derive(Debug, Clone)]
pub struct Pipeline {
    mode: Mode,
    augment: AugmentConfig,
    edges: EdgeConfig,
    orientation: Orientation,
    normaliser: Normaliser,
}

/// A decoded sample at its original resolution, with its edge map.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub image: RgbImage,
    pub label: LabelImage,
    pub edges: Vec<u8>,
}

/// One finished sample, planar and normalised (what a batch of size 1 holds).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub width: usize,
    pub height: usize,
    /// `[3, H, W]`, normalised RGB.
    pub image: Vec<f32>,
    /// `[H, W]` training ids or the ignore index.
    pub label: Vec<u8>,
    /// `[H, W]` 0/1.
    pub edges: Vec<u8>,
}

impl Pipeline {
    /// The pipeline of `mode` for `config` (checked first).
    pub fn new(config: &DataConfig, mode: Mode) -> Result<Self, DataError> {
        config.check()?;
        Ok(Self {
            mode,
            augment: config.augment.clone(),
            edges: config.edges.clone(),
            orientation: config.image_orientation(),
            normaliser: Normaliser::new(config.augment.mean, config.augment.std),
        })
    }

    /// Training or validation.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Reads the image and label of `entry`, checks they match, and computes the edge map on the
    /// label before any geometric change (as the official code does).
    pub fn decode(&self, entry: &SampleEntry, labels: &LabelMap) -> Result<Decoded, DataError> {
        let image = read_image_with(&entry.image, self.orientation)?;
        let label = read_label(&entry.label, labels)?;
        if (image.width, image.height) != (label.width, label.height) {
            return Err(DataError::SizeMismatch {
                image: entry.image.clone(),
                label: entry.label.clone(),
                image_width: image.width,
                image_height: image.height,
                label_width: label.width,
                label_height: label.height,
            });
        }
        let edges = edge_map(&label.pixels, label.width, label.height, &self.edges);
        Ok(Decoded {
            image,
            label,
            edges,
        })
    }

    /// The geometry of a decoded sample: drawn from `rng` in training, the identity in
    /// validation.
    pub fn geometry(&self, decoded: &Decoded, rng: &mut SplitMix64) -> Geometry {
        let (width, height) = (decoded.image.width, decoded.image.height);
        match self.mode {
            Mode::Train => Geometry::draw(width, height, &self.augment, rng),
            Mode::Validation => Geometry::identity(width, height),
        }
    }

    /// Writes the sample through `geometry` into `slot` (sized for `geometry`'s output).
    pub fn render_into(
        &self,
        decoded: &Decoded,
        geometry: &Geometry,
        ignore_index: u8,
        slot: SampleSlot<'_>,
    ) {
        render(
            &decoded.image,
            &decoded.label.pixels,
            &decoded.edges,
            geometry,
            &self.normaliser,
            ignore_index,
            slot,
        );
    }

    /// Decodes and transforms one sample with its own buffers.
    pub fn load(
        &self,
        entry: &SampleEntry,
        labels: &LabelMap,
        rng: &mut SplitMix64,
    ) -> Result<Sample, DataError> {
        let decoded = self.decode(entry, labels)?;
        let geometry = self.geometry(&decoded, rng);
        let pixels = geometry.width * geometry.height;
        let mut sample = Sample {
            width: geometry.width,
            height: geometry.height,
            image: vec![0.0; 3 * pixels],
            label: vec![0; pixels],
            edges: vec![0; pixels],
        };
        self.render_into(
            &decoded,
            &geometry,
            labels.ignore_index(),
            SampleSlot {
                image: &mut sample.image,
                label: &mut sample.label,
                edges: &mut sample.edges,
            },
        );
        Ok(sample)
    }
}

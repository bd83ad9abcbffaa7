//! Label encodings and their mapping to training ids (`0..num_classes`, or the ignore index).
//!
//! Mapping and validation are one pass: a value that is neither a class nor the ignore index is
//! counted and reported (value and pixel count), never silently turned into "ignore".

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{BadValues, LabelValue};
pub use crate::known_classes::{
    CAMVID_CLASSES, CAMVID_PALETTE, CITYSCAPES_CLASSES, CITYSCAPES_CLASS_WEIGHTS,
    CITYSCAPES_LABEL_ID_TO_TRAIN_ID, CITYSCAPES_PALETTE,
};
use crate::value_map::{eight_bit_brightness, ValueMap, INVALID};

/// How the label files of a dataset encode classes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LabelEncoding {
    /// Cityscapes `*_gtFine_labelIds.png`: ids 0..=33 (and 255 for id -1) mapped to the 19
    /// trainIds as in the official `datasets/cityscapes.py`; ids without a trainId become the
    /// ignore index. Values 34..=254 are not Cityscapes ids and are errors.
    CityscapesLabelIds,
    /// Cityscapes `*_gtFine_labelTrainIds.png`: 0..=18, and 255 for ignore.
    CityscapesTrainIds,
    /// CamVid colour-coded labels (`*_L.png`): the 11 colours of the official PIDNet CamVid
    /// loader by exact RGB match; every other colour becomes the ignore index.
    CamVidColours,
    /// Single-channel (grey or palette) class indices `0..classes.len()`; the ignore index is
    /// allowed, any other value is an error. `values` maps other encodings (0/255 binary
    /// masks, arbitrary values) onto the classes; `reduce_zero_label` reads ADE20K-style
    /// labels where 0 is "no class" and class `c` is stored as `c + 1`.
    Indices {
        classes: Vec<String>,
        #[serde(default)]
        values: ValueMap,
        #[serde(default)]
        reduce_zero_label: bool,
    },
}

impl LabelEncoding {
    /// Plain class indices `0..classes.len()` (and the ignore index).
    pub fn indices(classes: Vec<String>) -> Self {
        LabelEncoding::Indices {
            classes,
            values: ValueMap::Identity,
            reduce_zero_label: false,
        }
    }
}

#[derive(Debug, Clone)]
enum Mapping {
    /// Single-channel: raw value -> training id, or `INVALID`.
    Table(Box<[u16; 256]>),
    /// RGB: exact colours -> class; any other colour -> ignore.
    Colours(Vec<([u8; 3], u8)>),
}

/// A resolved label encoding: class names, colours, and the raw-to-training-id mapping.
#[derive(Debug, Clone)]
pub struct LabelMap {
    description: String,
    classes: Vec<String>,
    palette: Vec<[u8; 3]>,
    class_weights: Option<Vec<f32>>,
    ignore_index: u8,
    mapping: Mapping,
    /// Low-bit-depth grey values are compared at 8-bit brightness (binary masks).
    brightness: bool,
    /// Two plain index classes with 255 as the ignore index: a split of 0/255 masks would
    /// read "fine" with every foreground pixel ignored, so `scan_split` looks for that pattern.
    plain_two_classes: bool,
}

impl LabelMap {
    /// Resolves `encoding` with the given ignore index. Fails when a class id would collide with
    /// the ignore index or there are no classes at all.
    pub fn new(encoding: &LabelEncoding, ignore_index: u8) -> Result<Self, crate::DataError> {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut brightness = false;
        let mut plain_two_classes = false;
        let (description, classes, palette, class_weights, mapping) = match encoding {
            LabelEncoding::CityscapesLabelIds => {
                let mut table = [INVALID; 256];
                for id in (0..=33).chain([255]) {
                    table[id] = u16::from(ignore_index);
                }
                for (id, train_id) in CITYSCAPES_LABEL_ID_TO_TRAIN_ID {
                    table[usize::from(id)] = u16::from(train_id);
                }
                (
                    "Cityscapes labelIds 0..=33".to_string(),
                    names(&CITYSCAPES_CLASSES),
                    CITYSCAPES_PALETTE.to_vec(),
                    Some(CITYSCAPES_CLASS_WEIGHTS.to_vec()),
                    Mapping::Table(Box::new(table)),
                )
            }
            LabelEncoding::CityscapesTrainIds => {
                let (mut table, _) = ValueMap::Identity.table(19, false, ignore_index)?;
                table[255] = u16::from(ignore_index);
                (
                    "Cityscapes trainIds 0..=18".to_string(),
                    names(&CITYSCAPES_CLASSES),
                    CITYSCAPES_PALETTE.to_vec(),
                    Some(CITYSCAPES_CLASS_WEIGHTS.to_vec()),
                    Mapping::Table(Box::new(table)),
                )
            }
            LabelEncoding::CamVidColours => (
                "the 11 CamVid colours".to_string(),
                names(&CAMVID_CLASSES),
                CAMVID_PALETTE.to_vec(),
                None,
                Mapping::Colours(
                    CAMVID_PALETTE
                        .iter()
                        .enumerate()
                        .map(|(class, colour)| (*colour, class as u8))
                        .collect(),
                ),
            ),
            LabelEncoding::Indices {
                classes,
                values,
                reduce_zero_label,
            } => {
                if classes.is_empty() {
                    return Err(crate::DataError::config(
                        "classes",
                        "the class list is empty; name at least one class",
                    ));
                }
                if classes.len() > usize::from(ignore_index) {
                    return Err(crate::DataError::config(
                        "classes",
                        format!(
                            "{} classes need ids up to {}, which collides with ignore_index {}",
                            classes.len(),
                            classes.len() - 1,
                            ignore_index
                        ),
                    ));
                }
                let (table, description) =
                    values.table(classes.len(), *reduce_zero_label, ignore_index)?;
                brightness = values.compares_brightness();
                plain_two_classes = *values == ValueMap::Identity
                    && !reduce_zero_label
                    && classes.len() == 2
                    && ignore_index == 255;
                (
                    description,
                    classes.clone(),
                    pascal_voc_palette(classes.len()),
                    None,
                    Mapping::Table(Box::new(table)),
                )
            }
        };
        if classes.len() > usize::from(ignore_index) {
            return Err(crate::DataError::config(
                "ignore_index",
                format!(
                    "{ignore_index} is a class id of this dataset ({} classes)",
                    classes.len()
                ),
            ));
        }
        Ok(Self {
            description,
            classes,
            palette,
            class_weights,
            ignore_index,
            mapping,
            brightness,
            plain_two_classes,
        })
    }

    /// Whether 0/255 binary masks would be misread by this encoding (two plain index classes,
    /// 255 the ignore index); see `scan_split`.
    pub fn may_misread_binary_masks(&self) -> bool {
        self.plain_two_classes
    }

    /// Maps the values of a `bits`-deep grey label (not a palette one): brightness encodings
    /// see 1-, 2- and 4-bit values at 8-bit brightness, index encodings see them as stored.
    pub(crate) fn map_grey_levels(&self, raw: &[u8], bits: u8) -> Result<Vec<u8>, BadValues> {
        if self.brightness && bits < 8 {
            let scaled: Vec<u8> = raw.iter().map(|&v| eight_bit_brightness(v, bits)).collect();
            return self.map_grey(&scaled);
        }
        self.map_grey(raw)
    }

    /// The class names, in training-id order.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// How many classes there are (training ids are `0..num_classes()`).
    pub fn num_classes(&self) -> usize {
        self.classes.len()
    }

    /// One display colour per class, for coloured predictions.
    pub fn palette(&self) -> &[[u8; 3]] {
        &self.palette
    }

    /// The official per-class loss weights, where the recipe has them (Cityscapes only).
    pub fn class_weights(&self) -> Option<&[f32]> {
        self.class_weights.as_deref()
    }

    /// The training id of pixels that carry no class.
    pub fn ignore_index(&self) -> u8 {
        self.ignore_index
    }

    /// What the encoding accepts, for error messages.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Whether this encoding reads RGB label images (rather than single-channel ones).
    pub fn wants_colour(&self) -> bool {
        matches!(self.mapping, Mapping::Colours(_))
    }

    /// Maps single-channel raw values to training ids, or reports the values that are neither a
    /// class nor the ignore index.
    pub(crate) fn map_grey(&self, raw: &[u8]) -> Result<Vec<u8>, BadValues> {
        let Mapping::Table(table) = &self.mapping else {
            // A colour encoding given a single-channel file: no value can be right.
            return Err(bad_from_histogram(&histogram(raw), |_| true));
        };
        let mut lut = [0u8; 256];
        let mut invalid = [false; 256];
        for (value, &mapped) in table.iter().enumerate() {
            invalid[value] = mapped == INVALID;
            lut[value] = mapped as u8;
        }
        // Fast path: one look-up per pixel; the histogram is only built when something is wrong.
        let mut any_invalid = false;
        let mapped = raw
            .iter()
            .map(|&value| {
                any_invalid |= invalid[usize::from(value)];
                lut[usize::from(value)]
            })
            .collect();
        if any_invalid {
            return Err(bad_from_histogram(&histogram(raw), |v| {
                invalid[usize::from(v)]
            }));
        }
        Ok(mapped)
    }

    /// Maps interleaved RGB label pixels to training ids.
    pub(crate) fn map_rgb(&self, rgb: &[u8]) -> Result<Vec<u8>, BadValues> {
        let Mapping::Colours(colours) = &self.mapping else {
            let mut counts: HashMap<[u8; 3], u64> = HashMap::new();
            for px in rgb.chunks_exact(3) {
                *counts.entry([px[0], px[1], px[2]]).or_default() += 1;
            }
            return Err(bad_from_counts(
                counts
                    .into_iter()
                    .map(|(c, n)| (LabelValue::Colour(c), n))
                    .collect(),
            ));
        };
        let mut out = Vec::with_capacity(rgb.len() / 3);
        // Labels are mostly runs of one colour: remember the last match.
        let mut last = ([0u8; 3], self.lookup_colour(colours, [0, 0, 0]));
        for px in rgb.chunks_exact(3) {
            let colour = [px[0], px[1], px[2]];
            if colour != last.0 {
                last = (colour, self.lookup_colour(colours, colour));
            }
            out.push(last.1);
        }
        Ok(out)
    }

    fn lookup_colour(&self, colours: &[([u8; 3], u8)], colour: [u8; 3]) -> u8 {
        colours
            .iter()
            .find(|(c, _)| *c == colour)
            .map_or(self.ignore_index, |(_, class)| *class)
    }
}

fn histogram(pixels: &[u8]) -> [u64; 256] {
    let mut hist = [0u64; 256];
    for &p in pixels {
        hist[usize::from(p)] += 1;
    }
    hist
}

fn bad_from_histogram(hist: &[u64; 256], is_bad: impl Fn(u8) -> bool) -> BadValues {
    bad_from_counts(
        (0..=255u8)
            .filter(|&v| hist[usize::from(v)] > 0 && is_bad(v))
            .map(|v| (LabelValue::Index(v), hist[usize::from(v)]))
            .collect(),
    )
}

fn bad_from_counts(mut counts: Vec<(LabelValue, u64)>) -> BadValues {
    // Most frequent first; ties by value so the message is deterministic.
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let distinct = counts.len();
    let pixels = counts.iter().map(|(_, n)| n).sum();
    counts.truncate(BadValues::MAX_LISTED);
    BadValues {
        values: counts,
        distinct,
        pixels,
    }
}

/// The first `n` colours of the Pascal VOC colour map (id `i`'s bits spread over R, G and B),
/// also DAVIS' annotation palette: distinct, well-separated colours for datasets without an
/// official palette, which users of custom datasets will recognise.
pub fn pascal_voc_palette(n: usize) -> Vec<[u8; 3]> {
    (0..n)
        .map(|class| {
            let mut colour = [0u8; 3];
            let mut id = class;
            for bit in (0..8).rev() {
                for (channel, value) in colour.iter_mut().enumerate() {
                    *value |= (((id >> channel) & 1) as u8) << bit;
                }
                id >>= 3;
            }
            colour
        })
        .collect()
}

#[cfg(test)]
#[path = "labels_tests.rs"]
mod tests;

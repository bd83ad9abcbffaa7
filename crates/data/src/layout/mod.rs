//! Dataset layouts: how `(image, label, name)` triples are found on disk for a split.
//!
//! Every layout produces a [`Scan`]: the samples it found, sorted by image path so the index is
//! the same on every machine, and every problem it met (a missing label, a bad list line). The
//! index keeps the first problem as its error; `validate` reports them all.

mod ade20k;
mod camvid;
mod cityscapes;
mod entries;
mod folder_pair;
mod list_file;
mod pascal_voc;

pub use ade20k::ADE20K_CLASSES;
pub(crate) use entries::{absolute, is_image_file, sorted_entries};
pub use entries::{SampleEntry, Scan};
pub use pascal_voc::VOC_CLASSES;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::labels::LabelEncoding;
use crate::value_map::ValueMap;

/// Where a dataset is and how its files are arranged. Relative paths resolve against the current
/// directory; `{split}` in a path is replaced by the split name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Layout {
    /// `root/leftImg8bit/{split}/{city}/*_leftImg8bit.png` with
    /// `root/gtFine/{split}/{city}/*_gtFine_labelTrainIds.png` when the first image has one
    /// (cityscapesScripts' `createTrainIdLabelImgs` was run), else `*_gtFine_labelIds.png`
    /// mapped to the 19 trainIds.
    Cityscapes { root: PathBuf },
    /// CamVid with colour labels: `root/{images}/*.png` and
    /// `root/{labels}/<stem>{label_suffix}.png`, the 11 classes of the official loader.
    CamVid {
        root: PathBuf,
        /// Image folder under `root` (default `{split}`).
        #[serde(default = "camvid_images")]
        images: String,
        /// Label folder under `root` (default `{split}_labels`).
        #[serde(default = "camvid_labels")]
        labels: String,
        /// What follows the image stem in a label file name (default `_L`).
        #[serde(default = "camvid_suffix")]
        label_suffix: String,
    },
    /// A list file of `image label` lines with paths relative to `root`, like the official
    /// `list/cityscapes/train.lst`. Fields are separated by a tab when the line has one (so paths
    /// may contain spaces), else by whitespace.
    ListFile {
        root: PathBuf,
        /// The list itself, e.g. `data/list/cityscapes/{split}.lst`.
        list: PathBuf,
        /// How the listed labels encode classes (default: Cityscapes labelIds, as the official
        /// lists point at `*_gtFine_labelIds.png`).
        #[serde(default = "list_file_labels")]
        labels: LabelEncoding,
    },
    /// `images/<stem>.{png,jpg,jpeg}` matched with `masks/<stem>.png`; masks hold class indices
    /// `0..classes.len()` (or the ignore index), or what `values` maps onto them.
    FolderPair {
        images: PathBuf,
        masks: PathBuf,
        classes: Vec<String>,
        /// How mask values map to classes (default: as they are; `Binary(threshold: 128)` for
        /// 0/255 masks).
        #[serde(default)]
        values: ValueMap,
        /// Masks store class `c` as `c + 1` and 0 as "no class" (mmsegmentation's
        /// `reduce_zero_label`).
        #[serde(default)]
        reduce_zero_label: bool,
    },
    /// ADE20K as released for the scene-parsing challenge (`ADEChallengeData2016/`):
    /// `root/images/{split}/*.jpg` with `root/annotations/{split}/<stem>.png`, splits
    /// `training` and `validation`; 150 classes stored as 1..=150 with 0 = "other"
    /// (`reduce_zero_label`, as mmsegmentation reads them).
    Ade20k { root: PathBuf },
    /// Pascal VOC 2012 (`VOCdevkit/VOC2012/`): the ids of
    /// `root/ImageSets/Segmentation/{split}.txt`, images `root/JPEGImages/<id>.jpg` and palette
    /// labels `root/SegmentationClass/<id>.png` (palette index = class, 255 = the ignore
    /// border). Splits joined by `+` are concatenated; the list `aug` (SBD, written by
    /// mmsegmentation's `voc_aug.py`) takes its labels from `root/SegmentationClassAug/`, so
    /// `train_split: "train+aug"` is mmsegmentation's augmented training set.
    PascalVoc { root: PathBuf },
}

fn camvid_images() -> String {
    "{split}".to_string()
}

fn camvid_labels() -> String {
    "{split}_labels".to_string()
}

fn camvid_suffix() -> String {
    "_L".to_string()
}

fn list_file_labels() -> LabelEncoding {
    LabelEncoding::CityscapesLabelIds
}

impl Layout {
    /// A folder pair of plain class-index masks.
    pub fn folder_pair(images: PathBuf, masks: PathBuf, classes: Vec<String>) -> Self {
        Layout::FolderPair {
            images,
            masks,
            classes,
            values: ValueMap::Identity,
            reduce_zero_label: false,
        }
    }

    /// The label encoding of this layout, before scanning (Cityscapes may still switch to
    /// trainIds when it finds them).
    pub fn encoding(&self) -> LabelEncoding {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Layout::Cityscapes { .. } => LabelEncoding::CityscapesLabelIds,
            Layout::CamVid { .. } => LabelEncoding::CamVidColours,
            Layout::ListFile { labels, .. } => labels.clone(),
            Layout::FolderPair {
                classes,
                values,
                reduce_zero_label,
                ..
            } => LabelEncoding::Indices {
                classes: classes.clone(),
                values: values.clone(),
                reduce_zero_label: *reduce_zero_label,
            },
            Layout::Ade20k { .. } => LabelEncoding::Indices {
                classes: names(&ADE20K_CLASSES),
                values: ValueMap::Identity,
                reduce_zero_label: true,
            },
            Layout::PascalVoc { .. } => LabelEncoding::indices(names(&VOC_CLASSES)),
        }
    }

    /// Every path of the layout, to make them absolute in one place.
    pub fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        match self {
            Layout::Cityscapes { root }
            | Layout::CamVid { root, .. }
            | Layout::Ade20k { root }
            | Layout::PascalVoc { root } => vec![root],
            Layout::ListFile { root, list, .. } => vec![root, list],
            Layout::FolderPair { images, masks, .. } => vec![images, masks],
        }
    }

    /// Finds the samples of `split`. An unreadable root is a problem in the scan, not an error,
    /// so `validate` can report it with the rest.
    pub fn scan(&self, split: &str) -> Scan {
        let mut scan = match self {
            Layout::Cityscapes { root } => cityscapes::scan(&absolute(root), split),
            Layout::CamVid {
                root,
                images,
                labels,
                label_suffix,
            } => {
                let root = absolute(root);
                camvid::scan(
                    &root.join(with_split(images, split)),
                    &root.join(with_split(labels, split)),
                    label_suffix,
                )
            }
            Layout::ListFile { root, list, .. } => {
                let list = absolute(&path_with_split(list, split));
                list_file::scan(&absolute(root), &list)
            }
            Layout::FolderPair { images, masks, .. } => folder_pair::scan(
                &absolute(&path_with_split(images, split)),
                &absolute(&path_with_split(masks, split)),
            ),
            Layout::Ade20k { root } => ade20k::scan(&absolute(root), split),
            Layout::PascalVoc { root } => pascal_voc::scan(&absolute(root), split),
        };
        if scan.encoding.is_none() {
            scan.encoding = Some(self.encoding());
        }
        // read_dir order differs between file systems: sort for a machine-independent index.
        scan.samples.sort_by(|a, b| a.image.cmp(&b.image));
        if scan.samples.is_empty() && scan.problems.is_empty() {
            scan.problems.push(DataError::EmptySplit {
                split: split.to_string(),
                detail: self.describe(split),
            });
        }
        scan
    }

    /// Where this layout looks for `split`, for the empty-split message.
    fn describe(&self, split: &str) -> String {
        match self {
            Layout::Cityscapes { root } => format!(
                "no *_leftImg8bit.png in the city folders of {}",
                absolute(root).join("leftImg8bit").join(split).display()
            ),
            Layout::CamVid { root, images, .. } => format!(
                "no .png image in {}",
                absolute(root).join(with_split(images, split)).display()
            ),
            Layout::ListFile { list, .. } => format!(
                "the list {} has no entry",
                absolute(&path_with_split(list, split)).display()
            ),
            Layout::FolderPair { images, .. } => format!(
                "no .png/.jpg/.jpeg image in {}",
                absolute(&path_with_split(images, split)).display()
            ),
            Layout::Ade20k { root } => ade20k::describe(&absolute(root), split),
            Layout::PascalVoc { root } => format!(
                "the lists {} have no id",
                pascal_voc::list_paths(&absolute(root), split)
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Replaces `{split}` in a path string.
fn with_split(template: &str, split: &str) -> String {
    template.replace("{split}", split)
}

/// Replaces `{split}` in each component of a path, leaving components that are not valid UTF-8
/// untouched (they cannot contain the placeholder as text anyway).
fn path_with_split(path: &Path, split: &str) -> PathBuf {
    path.components()
        .map(|component| {
            let os = component.as_os_str();
            match os.to_str() {
                Some(text) if text.contains("{split}") => {
                    std::ffi::OsString::from(with_split(text, split))
                }
                _ => os.to_os_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_placeholders_are_replaced_in_every_component() {
        let path = path_with_split(Path::new("data/{split}/x_{split}.lst"), "val");
        assert_eq!(path, PathBuf::from("data/val/x_val.lst"));
        assert_eq!(with_split("{split}_labels", "test"), "test_labels");
    }

    #[test]
    fn layouts_read_from_ron_with_defaults() {
        let layout: Layout = ron::from_str(r#"CamVid(root: "data/camvid")"#).expect("valid");
        assert_eq!(
            layout,
            Layout::CamVid {
                root: PathBuf::from("data/camvid"),
                images: "{split}".into(),
                labels: "{split}_labels".into(),
                label_suffix: "_L".into(),
            }
        );
        let layout: Layout =
            ron::from_str(r#"ListFile(root: "data", list: "list/{split}.lst")"#).expect("valid");
        assert_eq!(layout.encoding(), LabelEncoding::CityscapesLabelIds);
        let layout: Layout = ron::from_str(
            r#"ListFile(root: "d", list: "l.lst", labels: Indices(classes: ["a", "b"]))"#,
        )
        .expect("valid");
        assert!(matches!(
            layout.encoding(),
            LabelEncoding::Indices { classes, .. } if classes == ["a", "b"]
        ));
        let error = ron::from_str::<Layout>(r#"Cityscapes(root: "x", rot: "y")"#)
            .expect_err("unknown field");
        assert!(error.to_string().contains("rot"), "{error}");
    }
}

#[cfg(test)]
mod layout_tests;

#[cfg(test)]
mod known_datasets_tests;

//! Pascal VOC 2012 segmentation (`VOCdevkit/VOC2012/`): image ids listed in
//! `ImageSets/Segmentation/<list>.txt`, images `JPEGImages/<id>.jpg`, labels
//! `SegmentationClass/<id>.png`, palette PNGs whose palette index is the class (0 background,
//! 1..=20 the objects) and 255 the "difficult" border, ignored.
//!
//! The SBD augmented set, as mmsegmentation prepares it (`tools/dataset_converters/voc_aug.py`):
//! the list `aug.txt` with grey labels in `SegmentationClassAug/`. A split `train+aug`
//! concatenates both lists, as mmsegmentation's `pascal_voc12_aug.py` does (ids in both lists
//! appear twice there too).

use std::path::{Path, PathBuf};

use super::entries::{SampleEntry, Scan};
use crate::error::DataError;

/// The 21 classes (palette index order).
pub const VOC_CLASSES: [&str; 21] = [
    "background",
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
];

/// The list that takes its labels from `SegmentationClassAug/`.
const AUGMENTED_LIST: &str = "aug";

/// The list files of `split` (`train+aug` names two).
pub(super) fn list_paths(root: &Path, split: &str) -> Vec<PathBuf> {
    split
        .split('+')
        .map(|name| {
            root.join("ImageSets")
                .join("Segmentation")
                .join(format!("{}.txt", name.trim()))
        })
        .collect()
}

pub(super) fn scan(root: &Path, split: &str) -> Scan {
    let mut scan = Scan::default();
    for (name, list) in split.split('+').zip(list_paths(root, split)) {
        let label_dir = root.join(if name.trim() == AUGMENTED_LIST {
            "SegmentationClassAug"
        } else {
            "SegmentationClass"
        });
        let text = match std::fs::read(&list) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(error) => {
                scan.problems.push(DataError::io(&list, error));
                continue;
            }
        };
        for (number, line) in text.lines().enumerate() {
            let id = line.trim();
            if id.is_empty() {
                continue;
            }
            if id.split_whitespace().count() != 1 {
                scan.problems.push(DataError::ListSyntax {
                    list: list.clone(),
                    line: number + 1,
                    message: format!(
                        "expected one image id per line, found {id:?}; a list of `image label` \
                         paths is read by the ListFile layout"
                    ),
                });
                continue;
            }
            let image = root.join("JPEGImages").join(format!("{id}.jpg"));
            let label = label_dir.join(format!("{id}.png"));
            let missing: Vec<&PathBuf> = [&image, &label]
                .into_iter()
                .filter(|p| !p.is_file())
                .collect();
            for path in &missing {
                scan.problems.push(DataError::MissingListedFile {
                    list: list.clone(),
                    line: number + 1,
                    path: (*path).clone(),
                });
            }
            if missing.is_empty() {
                scan.samples.push(SampleEntry {
                    image,
                    label,
                    name: id.to_string(),
                });
            }
        }
    }
    scan
}

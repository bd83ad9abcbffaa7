//! The Cityscapes layout: `leftImg8bit/{split}/{city}/<stem>_leftImg8bit.png` with
//! `gtFine/{split}/{city}/<stem>_gtFine_label{TrainIds,Ids}.png`.

use std::path::Path;

use super::entries::{file_name_str, sorted_entries, SampleEntry, Scan};
use crate::error::DataError;
use crate::labels::LabelEncoding;

const IMAGE_SUFFIX: &str = "_leftImg8bit.png";
const LABEL_IDS_SUFFIX: &str = "_gtFine_labelIds.png";
const TRAIN_IDS_SUFFIX: &str = "_gtFine_labelTrainIds.png";

pub(super) fn scan(root: &Path, split: &str) -> Scan {
    let image_dir = root.join("leftImg8bit").join(split);
    let label_dir = root.join("gtFine").join(split);
    let mut scan = Scan::default();
    let cities = match sorted_entries(&image_dir) {
        Ok(cities) => cities,
        Err(error) => {
            scan.problems.push(error);
            return scan;
        }
    };
    let mut images = Vec::new();
    for city in cities.iter().filter(|p| p.is_dir()) {
        match sorted_entries(city) {
            Ok(files) => images.extend(files.into_iter().filter_map(|path| {
                let stem = file_name_str(&path)?
                    .strip_suffix(IMAGE_SUFFIX)?
                    .to_string();
                Some((path, stem))
            })),
            Err(error) => scan.problems.push(error),
        }
    }
    // One encoding for the whole split: trainIds when the first image has them, so a partly
    // converted dataset is reported (missing labelTrainIds) instead of silently mixed.
    let use_train_ids = images.first().is_some_and(|(image, stem)| {
        label_path(&label_dir, image, stem, TRAIN_IDS_SUFFIX).is_some_and(|p| p.is_file())
    });
    let suffix = if use_train_ids {
        TRAIN_IDS_SUFFIX
    } else {
        LABEL_IDS_SUFFIX
    };
    scan.encoding = Some(if use_train_ids {
        LabelEncoding::CityscapesTrainIds
    } else {
        LabelEncoding::CityscapesLabelIds
    });
    for (image, stem) in images {
        let Some(label) = label_path(&label_dir, &image, &stem, suffix) else {
            continue;
        };
        if label.is_file() {
            scan.samples.push(SampleEntry {
                image,
                label,
                name: stem,
            });
        } else {
            scan.problems.push(DataError::MissingLabel {
                image,
                expected: label,
            });
        }
    }
    scan
}

/// `gtFine/{split}/{city}/<stem><suffix>`, the city taken from the image's folder.
fn label_path(
    label_dir: &Path,
    image: &Path,
    stem: &str,
    suffix: &str,
) -> Option<std::path::PathBuf> {
    let city = image.parent()?.file_name()?;
    Some(label_dir.join(city).join(format!("{stem}{suffix}")))
}

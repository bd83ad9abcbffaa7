//! A plain folder pair: `images/<stem>.{png,jpg,jpeg}` matched with `masks/<stem>.png`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::entries::{is_image_file, sorted_entries, SampleEntry, Scan};
use crate::error::DataError;

pub(super) fn scan(image_dir: &Path, mask_dir: &Path) -> Scan {
    let mut scan = Scan::default();
    let (images, masks) = match (sorted_entries(image_dir), sorted_entries(mask_dir)) {
        (Ok(images), Ok(masks)) => (images, masks),
        (images, masks) => {
            scan.problems.extend(images.err());
            scan.problems.extend(masks.err());
            return scan;
        }
    };
    // Masks must be lossless: only PNG masks are matched.
    let masks: HashMap<&std::ffi::OsStr, &PathBuf> = masks
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")))
        .filter_map(|p| Some((p.file_stem()?, p)))
        .collect();
    for image in images.into_iter().filter(|p| is_image_file(p)) {
        let Some(stem) = image.file_stem() else {
            continue;
        };
        match masks.get(stem) {
            Some(mask) => scan.samples.push(SampleEntry {
                name: stem.to_string_lossy().into_owned(),
                label: (*mask).clone(),
                image,
            }),
            None => {
                let mut expected = mask_dir.join(stem);
                expected.set_extension("png");
                scan.problems
                    .push(DataError::MissingLabel { image, expected });
            }
        }
    }
    scan
}

//! CamVid as commonly distributed (701 images, 32-colour labels): `<images>/<stem>.png` with
//! `<labels>/<stem>_L.png`. The official PIDNet loader keeps 11 of the colours.

use std::path::Path;

use super::entries::{file_name_str, is_image_file, sorted_entries, SampleEntry, Scan};
use crate::error::DataError;

pub(super) fn scan(image_dir: &Path, label_dir: &Path, label_suffix: &str) -> Scan {
    let mut scan = Scan::default();
    let files = match sorted_entries(image_dir) {
        Ok(files) => files,
        Err(error) => {
            scan.problems.push(error);
            return scan;
        }
    };
    // Some CamVid copies keep the labels beside the images: those are not images to train on.
    let label_ending = format!("{label_suffix}.png");
    let is_label = |p: &Path| {
        !label_suffix.is_empty() && file_name_str(p).is_some_and(|n| n.ends_with(&label_ending))
    };
    for image in files
        .into_iter()
        .filter(|p| is_image_file(p) && !is_label(p))
    {
        let Some(stem) = image
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        let label = label_dir.join(format!("{stem}{label_suffix}.png"));
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

//! A list file of `image label` lines relative to a root, like the official `.lst` files.

use std::path::Path;

use super::entries::{file_name_str, SampleEntry, Scan};
use crate::error::DataError;

pub(super) fn scan(root: &Path, list: &Path) -> Scan {
    let mut scan = Scan::default();
    let text = match std::fs::read(list) {
        // Lists are text, but a stray non-UTF-8 byte should not hide every other line.
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) => {
            scan.problems.push(DataError::io(list, error));
            return scan;
        }
    };
    for (number, raw) in text.lines().enumerate() {
        let line = number + 1;
        let trimmed = raw.trim_end_matches('\r').trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = if trimmed.contains('\t') {
            trimmed
                .split('\t')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .collect()
        } else {
            trimmed.split_whitespace().collect()
        };
        let [image, label] = fields[..] else {
            scan.problems.push(DataError::ListSyntax {
                list: list.to_path_buf(),
                line,
                message: format!(
                    "expected `image label` (2 fields), found {} in {trimmed:?}; separate paths \
                     that contain spaces with a tab",
                    fields.len()
                ),
            });
            continue;
        };
        let image = root.join(image);
        let label = root.join(label);
        let mut complete = true;
        for path in [&image, &label] {
            if !path.is_file() {
                complete = false;
                scan.problems.push(DataError::MissingListedFile {
                    list: list.to_path_buf(),
                    line,
                    path: path.clone(),
                });
            }
        }
        if complete {
            let name = sample_name(&image);
            scan.samples.push(SampleEntry { image, label, name });
        }
    }
    scan
}

/// The image's stem without Cityscapes' `_leftImg8bit`, so names match the other layouts.
fn sample_name(image: &Path) -> String {
    let stem = image
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match file_name_str(image).and_then(|n| n.strip_suffix("_leftImg8bit.png")) {
        Some(city_stem) => city_stem.to_string(),
        None => stem,
    }
}

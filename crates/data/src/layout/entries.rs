//! What scanning a split yields ([`SampleEntry`], [`Scan`]) and the directory helpers every
//! layout scans with. Below `layout/mod.rs` and each layout, so that the layouts use it without
//! importing from the module that dispatches to them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::labels::LabelEncoding;

/// One sample of an index: full paths of its image and label, and a name for reports and
/// prediction files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleEntry {
    pub image: PathBuf,
    pub label: PathBuf,
    pub name: String,
}

/// What scanning a split found.
#[derive(Debug, Default)]
pub struct Scan {
    pub samples: Vec<SampleEntry>,
    pub problems: Vec<DataError>,
    /// How the labels found encode classes.
    pub encoding: Option<LabelEncoding>,
}

/// The absolute form of a config path, so every error shows the full path.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The entries of a directory, sorted, as full paths; an unreadable directory is an error
/// naming it.
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    let reader = std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))?;
    let mut paths = Vec::new();
    for entry in reader {
        let entry = entry.map_err(|e| DataError::io(dir, e))?;
        paths.push(entry.path());
    }
    paths.sort();
    Ok(paths)
}

/// A file name's text, when it is valid UTF-8 (non-UTF-8 names cannot match our patterns).
pub(crate) fn file_name_str(path: &Path) -> Option<&str> {
    path.file_name().and_then(|name| name.to_str())
}

/// Whether a path names an image segburn decodes, by extension (case-insensitive).
pub(crate) fn is_image_file(path: &Path) -> bool {
    path.extension()
        .and_then(|ext| ext.to_str())
        .is_some_and(|ext| {
            let ext = ext.to_ascii_lowercase();
            ext == "png" || ext == "jpg" || ext == "jpeg"
        })
        && path.is_file()
}

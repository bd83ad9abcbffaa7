//! The object index of one split: each image with where its objects (and optionally its cached
//! embedding) are. Files are found once, sorted by image path, so the index is the same on
//! every machine.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::config::{ObjectDataConfig, ObjectSource};
use super::error::ObjectError;
use crate::index::DatasetIndex;
use crate::labels::LabelMap;
use crate::layout::{absolute, is_image_file, sorted_entries};

/// Where the objects of one image are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectFiles {
    /// A semantic label; objects are its connected components.
    Semantic(PathBuf),
    /// An instance map; every non-zero value is an object.
    Instances(PathBuf),
    /// One PNG per object, sorted by file name (possibly none).
    MaskFiles(Vec<PathBuf>),
}

/// One image of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEntry {
    /// Used for embedding files and outputs (the image's stem).
    pub name: String,
    pub image: PathBuf,
    pub objects: ObjectFiles,
    /// `<embeddings>/<name>.safetensors`, when cached embeddings are configured.
    pub embedding: Option<PathBuf>,
}

/// The images of one split.
#[derive(Debug, Clone)]
pub struct ObjectIndex {
    split: String,
    entries: Vec<ObjectEntry>,
    /// The class mapping of semantic sources.
    labels: Option<LabelMap>,
}

/// Replaces `{split}` in every component of `path` and makes it absolute.
pub fn path_for_split(path: &Path, split: &str) -> PathBuf {
    let replaced: PathBuf = path
        .components()
        .map(|component| {
            let os = component.as_os_str();
            match os.to_str() {
                Some(text) if text.contains("{split}") => {
                    OsString::from(text.replace("{split}", split))
                }
                _ => os.to_os_string(),
            }
        })
        .collect();
    absolute(&replaced)
}

impl ObjectIndex {
    /// Scans `split` of the configured source; fails on the first problem (a missing mask
    /// folder or embedding, an unreadable directory) or an empty split.
    pub fn new(config: &ObjectDataConfig, split: &str) -> Result<Self, ObjectError> {
        let (mut entries, labels) = match &config.source {
            ObjectSource::SemanticComponents {
                layout,
                ignore_index,
                ..
            } => {
                let index = DatasetIndex::new(layout, split, *ignore_index)?;
                let entries = index
                    .samples()
                    .iter()
                    .map(|sample| ObjectEntry {
                        name: sample.name.clone(),
                        image: sample.image.clone(),
                        objects: ObjectFiles::Semantic(sample.label.clone()),
                        embedding: None,
                    })
                    .collect();
                (entries, Some(index.label_map().clone()))
            }
            ObjectSource::InstanceMasks {
                images, instances, ..
            } => {
                let instances = path_for_split(instances, split);
                let entries = scan_images(&path_for_split(images, split), |stem| {
                    let file = instances.join(format!("{stem}.png"));
                    file.is_file()
                        .then(|| ObjectFiles::Instances(file.clone()))
                        .ok_or(file)
                })?;
                (entries, None)
            }
            ObjectSource::ObjectMaskFolders { images, masks, .. } => {
                let masks = path_for_split(masks, split);
                let entries = scan_images(&path_for_split(images, split), |stem| {
                    let folder = masks.join(stem);
                    if !folder.is_dir() {
                        return Err(folder);
                    }
                    let files = sorted_entries(&folder).map_err(|_| folder.clone())?;
                    Ok(ObjectFiles::MaskFiles(
                        files
                            .into_iter()
                            .filter(|p| {
                                p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png"))
                                    && p.is_file()
                            })
                            .collect(),
                    ))
                })?;
                (entries, None)
            }
        };
        if entries.is_empty() {
            return Err(crate::DataError::EmptySplit {
                split: split.to_string(),
                detail: "no image with objects was found".to_string(),
            }
            .into());
        }
        if let Some(dir) = &config.embeddings {
            let dir = path_for_split(dir, split);
            for entry in &mut entries {
                let file = dir.join(format!("{}.safetensors", entry.name));
                if !file.is_file() {
                    return Err(ObjectError::MissingEmbedding {
                        image: entry.image.clone(),
                        expected: file,
                    });
                }
                entry.embedding = Some(file);
            }
        }
        Ok(Self {
            split: split.to_string(),
            entries,
            labels,
        })
    }

    /// An index over given entries (tests, hand-made subsets).
    pub fn from_entries(
        split: impl Into<String>,
        entries: Vec<ObjectEntry>,
        labels: Option<LabelMap>,
    ) -> Self {
        Self {
            split: split.into(),
            entries,
            labels,
        }
    }

    pub fn split(&self) -> &str {
        &self.split
    }

    pub fn entries(&self) -> &[ObjectEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The class mapping, for semantic sources.
    pub fn label_map(&self) -> Option<&LabelMap> {
        self.labels.as_ref()
    }
}

/// The images of `dir` (sorted), each with the objects `objects_of(stem)` finds; `Err(path)`
/// from it names the file or folder that should exist.
fn scan_images(
    dir: &Path,
    objects_of: impl Fn(&str) -> Result<ObjectFiles, PathBuf>,
) -> Result<Vec<ObjectEntry>, ObjectError> {
    let mut entries = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for image in sorted_entries(dir)?
        .into_iter()
        .filter(|p| is_image_file(p))
    {
        let Some(stem) = image.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if let Some(first) = seen.insert(stem.clone(), image.clone()) {
            return Err(ObjectError::Config {
                field: "data.source.images".to_string(),
                message: format!(
                    "{} and {} share the stem `{stem}`, so their objects and embeddings would \
                     collide; rename one",
                    first.display(),
                    image.display()
                ),
            });
        }
        let objects = objects_of(&stem).map_err(|expected| ObjectError::MissingObjects {
            image: image.clone(),
            expected,
        })?;
        entries.push(ObjectEntry {
            name: stem,
            image,
            objects,
            embedding: None,
        });
    }
    Ok(entries)
}

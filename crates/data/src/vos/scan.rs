//! Scanning a VOS split: its videos (sorted by name), each video's frames (sorted by file
//! name) with their annotations matched by stem, and the objects of its first annotated frame.
//!
//! A scan reads two files per video: the first frame (its size is the video's size) and the
//! first annotation (its ids are the video's objects, as DAVIS' semi-supervised protocol
//! defines them). Everything else is read when a clip needs it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::annotation::read_annotation;
use super::config::VosLayout;
use super::error::VosError;
use crate::decode::{read_image_with, Orientation};
use crate::layout::{absolute, is_image_file, sorted_entries};

/// One frame of a video.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VosFrame {
    /// The file stem (`00000`).
    pub name: String,
    pub image: PathBuf,
    /// `None` for an unannotated frame (MOSE and SA-V validation annotate only some).
    pub annotation: Option<PathBuf>,
}

/// One video: its frames in order, its size and its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VosVideo {
    pub name: String,
    pub frames: Vec<VosFrame>,
    /// The size of the first frame; every frame and annotation must have it.
    pub width: usize,
    pub height: usize,
    /// The position (in `frames`) of the first annotated frame.
    pub first_annotated: usize,
    /// The object ids of the first annotated frame, ascending.
    pub object_ids: Vec<u32>,
}

impl VosVideo {
    /// The positions (in `frames`) of the annotated frames, in order.
    pub fn annotated_positions(&self) -> Vec<usize> {
        let frames = self.frames.iter().enumerate();
        frames
            .filter(|(_, frame)| frame.annotation.is_some())
            .map(|(position, _)| position)
            .collect()
    }

    /// The first frame's file, which sets the video's size.
    pub fn first_frame(&self) -> &Path {
        &self.frames[0].image
    }

    /// Every object id of any annotation of the video, ascending. Reads all its annotations
    /// (and checks their sizes), so it costs what reading the whole video's masks costs.
    pub fn all_object_ids(&self) -> Result<Vec<u32>, VosError> {
        let mut ids = Vec::new();
        for frame in &self.frames {
            if let Some(path) = &frame.annotation {
                let annotation = read_annotation(path)?;
                self.check_size(path, annotation.width, annotation.height)?;
                ids.extend(annotation.object_ids());
            }
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// An error unless `width x height` is the video's size.
    pub fn check_size(&self, file: &Path, width: usize, height: usize) -> Result<(), VosError> {
        if (width, height) == (self.width, self.height) {
            return Ok(());
        }
        Err(VosError::FrameSize {
            video: self.name.clone(),
            file: file.to_path_buf(),
            width,
            height,
            first: self.first_frame().to_path_buf(),
            first_width: self.width,
            first_height: self.height,
        })
    }
}

/// The videos of one split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VosIndex {
    /// `None`: every video of the frames folder.
    split: Option<String>,
    videos: Vec<VosVideo>,
}

impl VosIndex {
    /// Scans the videos named by `<split_files>/<split>.txt`, or with `split = None` every
    /// folder of the frames folder; videos are sorted by name either way (as the official
    /// `PNGRawDataset` does). Fails on the first problem, naming it.
    pub fn new(layout: &VosLayout, split: Option<&str>) -> Result<Self, VosError> {
        let images = absolute(&layout.images_dir());
        let annotations = absolute(&layout.annotations_dir());
        for (what, dir) in [("frames", &images), ("Annotations", &annotations)] {
            if !dir.is_dir() {
                return Err(VosError::MissingFolder {
                    what,
                    expected: dir.clone(),
                });
            }
        }
        let names = match split {
            Some(split) => split_videos(&absolute(&layout.split_file(split)), split, &images)?,
            None => sorted_entries(&images)?
                .into_iter()
                .filter(|path| path.is_dir())
                .filter_map(|path| Some(path.file_name()?.to_string_lossy().into_owned()))
                .collect(),
        };
        let split_name = split.unwrap_or("(all videos)");
        if names.is_empty() {
            return Err(VosError::EmptySplit {
                split: split_name.to_string(),
                detail: format!("no video folder in {}", images.display()),
            });
        }
        let videos = names
            .iter()
            .map(|name| scan_video(name, &images.join(name), &annotations.join(name)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            split: split.map(str::to_string),
            videos,
        })
    }

    /// An index over given videos (tests, hand-made subsets).
    pub fn from_videos(split: Option<String>, videos: Vec<VosVideo>) -> Self {
        Self { split, videos }
    }

    pub fn split(&self) -> Option<&str> {
        self.split.as_deref()
    }

    pub fn videos(&self) -> &[VosVideo] {
        &self.videos
    }

    pub fn len(&self) -> usize {
        self.videos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.videos.is_empty()
    }
}

/// The video names of a split file: one per line, blank lines skipped, sorted and deduplicated;
/// each must have its frames folder.
fn split_videos(list: &Path, split: &str, images: &Path) -> Result<Vec<String>, VosError> {
    if !list.is_file() {
        return Err(VosError::MissingSplitFile {
            split: split.to_string(),
            expected: list.to_path_buf(),
        });
    }
    let text = std::fs::read_to_string(list).map_err(|e| crate::DataError::io(list, e))?;
    let mut names = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let name = line.trim();
        if name.is_empty() {
            continue;
        }
        let folder = images.join(name);
        if !folder.is_dir() {
            return Err(VosError::MissingVideo {
                list: list.to_path_buf(),
                line: number + 1,
                video: name.to_string(),
                expected: folder,
            });
        }
        names.push(name.to_string());
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// The files of `dir` by stem, sorted by file name, with duplicate stems refused.
fn files_by_stem(
    dir: &Path,
    keep: impl Fn(&Path) -> bool,
) -> Result<Vec<(String, PathBuf)>, VosError> {
    let mut files = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for path in sorted_entries(dir)?.into_iter().filter(|p| keep(p)) {
        let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if let Some(first) = seen.insert(stem.clone(), path.clone()) {
            return Err(VosError::DuplicateStem {
                first,
                second: path,
                stem,
            });
        }
        files.push((stem, path));
    }
    Ok(files)
}

fn is_png_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("png"))
        && path.is_file()
}

fn scan_video(name: &str, frames_dir: &Path, annotations_dir: &Path) -> Result<VosVideo, VosError> {
    let images = files_by_stem(frames_dir, is_image_file)?;
    if images.is_empty() {
        return Err(VosError::NoFrames {
            video: name.to_string(),
            folder: frames_dir.to_path_buf(),
        });
    }
    let mut annotations: HashMap<String, PathBuf> = if annotations_dir.is_dir() {
        files_by_stem(annotations_dir, is_png_file)?
            .into_iter()
            .collect()
    } else {
        HashMap::new()
    };
    let frames: Vec<VosFrame> = images
        .into_iter()
        .map(|(stem, image)| VosFrame {
            annotation: annotations.remove(&stem),
            name: stem,
            image,
        })
        .collect();
    // What is left matched no frame: a renamed or missing frame the user should hear about.
    if let Some(annotation) = annotations.into_values().min() {
        let stem = annotation.file_stem().unwrap_or_default().to_os_string();
        return Err(VosError::OrphanAnnotation {
            expected: frames_dir.join(stem),
            annotation,
        });
    }
    let first_annotation = frames
        .iter()
        .enumerate()
        .find_map(|(position, frame)| Some((position, frame.annotation.clone()?)));
    let Some((first_annotated, path)) = first_annotation else {
        return Err(VosError::NoAnnotatedFrame {
            video: name.to_string(),
            folder: annotations_dir.to_path_buf(),
        });
    };
    // SAM 2 reads frames with Pillow, which ignores EXIF orientation.
    let first = read_image_with(&frames[0].image, Orientation::AsStored)?;
    let mut video = VosVideo {
        name: name.to_string(),
        width: first.width,
        height: first.height,
        first_annotated,
        object_ids: Vec::new(),
        frames,
    };
    let annotation = read_annotation(&path)?;
    video.check_size(&path, annotation.width, annotation.height)?;
    video.object_ids = annotation.object_ids();
    Ok(video)
}

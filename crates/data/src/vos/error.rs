//! Errors of the video (VOS) data: the data layer's own errors plus what only videos can get
//! wrong. Every variant names the file, folder or video it is about and the numbers involved.

use std::path::PathBuf;

use crate::error::DataError;

/// Why a VOS dataset could not be scanned or a clip could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VosError {
    /// Reading or decoding a file failed.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A configuration value that cannot work.
    #[error("invalid VOS data config `{field}`: {message}")]
    Config { field: String, message: String },
    /// The frames folder (`JPEGImages`) or the annotations folder (`Annotations`) is missing.
    #[error("no {what} folder: expected {expected}")]
    MissingFolder {
        what: &'static str,
        expected: PathBuf,
    },
    /// A split named on the command line or in the config without its list file.
    #[error("no list file for split `{split}`: expected {expected}")]
    MissingSplitFile { split: String, expected: PathBuf },
    /// A video named by a split file without its frames folder.
    #[error("{list}, line {line}: video `{video}` has no frames folder {expected}")]
    MissingVideo {
        list: PathBuf,
        line: usize,
        video: String,
        expected: PathBuf,
    },
    /// A split (or the whole frames folder) without any video.
    #[error("split `{split}` has no video: {detail}")]
    EmptySplit { split: String, detail: String },
    /// A video folder without any frame.
    #[error("video `{video}` has no frame (.jpg, .jpeg or .png) in {folder}")]
    NoFrames { video: String, folder: PathBuf },
    /// A video none of whose frames has an annotation.
    #[error(
        "video `{video}` has no annotated frame: no <frame>.png in {folder} matches a frame of \
         the video"
    )]
    NoAnnotatedFrame { video: String, folder: PathBuf },
    /// Two frames (or two annotations) of a video with the same file stem.
    #[error("{first} and {second} share the stem `{stem}`; a frame must be unique by stem")]
    DuplicateStem {
        first: PathBuf,
        second: PathBuf,
        stem: String,
    },
    /// An annotation whose frame does not exist.
    #[error("annotation {annotation} has no frame: expected {expected}.jpg, .jpeg or .png")]
    OrphanAnnotation {
        annotation: PathBuf,
        expected: PathBuf,
    },
    /// An annotation that is not an 8-bit palette or grey PNG.
    #[error(
        "annotation {path} is {found}; VOS annotations must be 8-bit palette (indexed) or \
         8-bit grey PNGs whose values are object ids (0 background, 255 void)"
    )]
    AnnotationFormat { path: PathBuf, found: String },
    /// A frame or annotation whose size differs from the video's first frame.
    #[error(
        "size mismatch in video `{video}`: {file} is {width}x{height} (w x h) but the video's \
         first frame {first} is {first_width}x{first_height}"
    )]
    FrameSize {
        video: String,
        file: PathBuf,
        width: usize,
        height: usize,
        first: PathBuf,
        first_width: usize,
        first_height: usize,
    },
    /// A video with fewer annotated frames than a training clip needs.
    #[error(
        "video `{video}` has {annotated} annotated frames but a clip needs {num_frames} \
         (lower `num_frames` or leave the video out of the split)"
    )]
    VideoTooShort {
        video: String,
        annotated: usize,
        num_frames: usize,
    },
    /// No clip start of a video shows an object in its first frame.
    #[error(
        "video `{video}`: none of {tries} drawn clips shows an object in its first frame \
         (are its annotations empty?)"
    )]
    NoVisibleObjects { video: String, tries: usize },
    /// A loader thread stopped without its clip: a bug in segburn, reported instead of a hang.
    #[error("the VOS loader thread stopped before clip {position} of epoch {epoch}")]
    LoaderStopped { epoch: u64, position: usize },
    /// A video index past the end of the dataset.
    #[error("video {index} does not exist: the split has {len} videos")]
    VideoOutOfRange { index: usize, len: usize },
}

impl VosError {
    pub(crate) fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        VosError::Config {
            field: field.into(),
            message: message.into(),
        }
    }
}

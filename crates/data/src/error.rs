//! The one error type of the data layer. Every variant names the file it is about (the full path,
//! as the index resolved it) and carries the numbers a user needs to fix the problem.

use std::fmt;
use std::path::PathBuf;

/// A label value as found in the file: a single-channel index or an RGB colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LabelValue {
    /// A grey or palette-index value.
    Index(u8),
    /// An RGB colour (colour-coded label images such as CamVid's).
    Colour([u8; 3]),
}

impl fmt::Display for LabelValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabelValue::Index(value) => write!(f, "{value}"),
            LabelValue::Colour([r, g, b]) => write!(f, "rgb({r}, {g}, {b})"),
        }
    }
}

/// Label values that are neither a class nor the ignore index, with their pixel counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadValues {
    /// The offending values, most frequent first, at most [`BadValues::MAX_LISTED`] of them.
    pub values: Vec<(LabelValue, u64)>,
    /// How many distinct offending values there are in all (may exceed `values.len()`).
    pub distinct: usize,
    /// How many pixels carry an offending value.
    pub pixels: u64,
}

impl BadValues {
    /// How many distinct values an error lists before it says "and N more".
    pub const MAX_LISTED: usize = 16;
}

impl fmt::Display for BadValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (value, count)) in self.values.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            let plural = if *count == 1 { "" } else { "s" };
            write!(f, "value {value} on {count} pixel{plural}")?;
        }
        if self.distinct > self.values.len() {
            write!(f, " and {} more values", self.distinct - self.values.len())?;
        }
        write!(f, " ({} pixels in all)", self.pixels)
    }
}

/// Everything that can go wrong between a dataset on disk and a batch.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An image or label file is corrupt, truncated or not an image.
    #[error("cannot decode {path}: {message}")]
    Decode { path: PathBuf, message: String },
    /// A decodable file whose pixel format segburn does not accept for its role.
    #[error("unsupported pixel format in {path}: {detail}")]
    UnsupportedFormat { path: PathBuf, detail: String },
    /// An image without its label file.
    #[error("no label for image {image}: expected {expected}")]
    MissingLabel { image: PathBuf, expected: PathBuf },
    /// A file named by a list file that does not exist.
    #[error("{list}, line {line}: {path} does not exist")]
    MissingListedFile {
        list: PathBuf,
        line: usize,
        path: PathBuf,
    },
    /// A line of a list file that is not `image label`.
    #[error("{list}, line {line}: {message}")]
    ListSyntax {
        list: PathBuf,
        line: usize,
        message: String,
    },
    /// An image and its label differ in size.
    #[error(
        "size mismatch: image {image} is {image_width}x{image_height} (w x h) but its label \
         {label} is {label_width}x{label_height}"
    )]
    SizeMismatch {
        image: PathBuf,
        label: PathBuf,
        image_width: usize,
        image_height: usize,
        label_width: usize,
        label_height: usize,
    },
    /// Label values that are neither a class nor the ignore index.
    #[error(
        "label {path} has values that are neither a class ({encoding}) nor the ignore index \
         {ignore_index}: {bad}"
    )]
    BadLabelValues {
        path: PathBuf,
        encoding: String,
        ignore_index: u8,
        bad: BadValues,
    },
    /// Label files of a two-class index dataset that look like 8-bit binary masks (foreground
    /// stored as 255, the ignore index, or as anti-aliased values).
    #[error(
        "{files} of {samples} label files of split `{split}` look like 8-bit binary masks \
         (foreground stored as 255 or as anti-aliased values up to 255; e.g. {example}): 255 is \
         the ignore index, so their foreground would be ignored or rejected. Add \
         `values: Binary(threshold: 128)` to the FolderPair layout (or to `labels: Indices(..)` \
         of a ListFile): values >= 128 become class 1, the rest class 0"
    )]
    LooksLikeBinaryMasks {
        split: String,
        files: usize,
        samples: usize,
        example: PathBuf,
    },
    /// A split with no sample in it.
    #[error("split `{split}` is empty: {detail}")]
    EmptySplit { split: String, detail: String },
    /// A configuration value that cannot work.
    #[error("invalid data config `{field}`: {message}")]
    Config { field: String, message: String },
    /// Images of one batch must share a size (validation at full resolution with mixed sizes
    /// needs batch size 1).
    #[error(
        "images of one batch differ in size: {first} is {first_width}x{first_height} but {other} \
         is {other_width}x{other_height} (w x h); use batch size 1 for mixed sizes"
    )]
    BatchShape {
        first: PathBuf,
        other: PathBuf,
        first_width: usize,
        first_height: usize,
        other_width: usize,
        other_height: usize,
    },
    /// A batch number past the end of the epoch.
    #[error("batch {batch} does not exist: an epoch has {batches} batches")]
    BatchOutOfRange { batch: usize, batches: usize },
    /// A worker thread panicked: a bug in segburn, reported instead of a hang.
    #[error("a data worker panicked while building batch {batch} of epoch {epoch}: {message}")]
    WorkerPanicked {
        epoch: u64,
        batch: usize,
        message: String,
    },
    /// The workers went away before a batch arrived (they only stop early after an error).
    #[error("the data workers stopped before batch {batch} of epoch {epoch} was built")]
    WorkersStopped { epoch: u64, batch: usize },
    /// The operating system refused a worker thread.
    #[error("cannot start a data worker thread: {source}")]
    Spawn {
        #[source]
        source: std::io::Error,
    },
}

impl DataError {
    /// The file this error is about, when it is about one file.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            DataError::Io { path, .. }
            | DataError::Decode { path, .. }
            | DataError::UnsupportedFormat { path, .. }
            | DataError::BadLabelValues { path, .. } => Some(path),
            DataError::MissingLabel { image, .. } => Some(image),
            DataError::MissingListedFile { path, .. } => Some(path),
            DataError::ListSyntax { list, .. } => Some(list),
            DataError::SizeMismatch { label, .. } => Some(label),
            DataError::LooksLikeBinaryMasks { example, .. } => Some(example),
            DataError::BatchShape { other, .. } => Some(other),
            DataError::EmptySplit { .. }
            | DataError::Config { .. }
            | DataError::BatchOutOfRange { .. }
            | DataError::WorkerPanicked { .. }
            | DataError::WorkersStopped { .. }
            | DataError::Spawn { .. } => None,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        DataError::Config {
            field: field.into(),
            message: message.into(),
        }
    }
}

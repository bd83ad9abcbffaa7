//! Binary masks and label maps (DAVIS annotations: 0 background, 1..=K objects, 255 void).

use super::VosError;

/// The DAVIS label of void (unannotated) pixels.
pub const VOID_LABEL: u8 = 255;

/// A binary mask, row-major: `pixels[y * width + x]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryMask {
    height: usize,
    width: usize,
    pixels: Vec<bool>,
}

impl BinaryMask {
    /// A mask from row-major pixels; an error unless there are `height × width` of them.
    pub fn new(height: usize, width: usize, pixels: Vec<bool>) -> Result<Self, VosError> {
        check_len(height, width, pixels.len())?;
        Ok(Self {
            height,
            width,
            pixels,
        })
    }

    /// A mask with no pixel set.
    pub fn empty(height: usize, width: usize) -> Self {
        Self {
            height,
            width,
            pixels: vec![false; height * width],
        }
    }

    /// The pixels of `values` that are not 0 (as the official code's `astype(bool)`).
    pub fn from_u8(height: usize, width: usize, values: &[u8]) -> Result<Self, VosError> {
        check_len(height, width, values.len())?;
        Ok(Self {
            height,
            width,
            pixels: values.iter().map(|&v| v != 0).collect(),
        })
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Columns.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The row-major pixels.
    pub fn pixels(&self) -> &[bool] {
        &self.pixels
    }

    /// Number of pixels set.
    pub fn count(&self) -> usize {
        self.pixels.iter().filter(|&&p| p).count()
    }

    /// An error naming both sizes unless `self` (called `what`) is as large as `reference`.
    pub(crate) fn check_size(&self, reference: &Self, what: &str) -> Result<(), VosError> {
        check_same(
            (reference.height, reference.width),
            (self.height, self.width),
            what,
        )
    }
}

/// One frame of labels, row-major: 0 background, `1..=K` objects, [`VOID_LABEL`] void.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelMap {
    height: usize,
    width: usize,
    labels: Vec<u8>,
}

impl LabelMap {
    /// A label map; an error unless there are `height × width` labels.
    pub fn new(height: usize, width: usize, labels: Vec<u8>) -> Result<Self, VosError> {
        check_len(height, width, labels.len())?;
        Ok(Self {
            height,
            width,
            labels,
        })
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Columns.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The row-major labels.
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }

    /// The pixels labelled `id`.
    pub fn object(&self, id: u8) -> BinaryMask {
        BinaryMask {
            height: self.height,
            width: self.width,
            pixels: self.labels.iter().map(|&l| l == id).collect(),
        }
    }

    /// The void pixels ([`VOID_LABEL`]).
    pub fn void(&self) -> BinaryMask {
        self.object(VOID_LABEL)
    }

    /// The largest label other than void (0 when there is no object).
    pub fn max_object(&self) -> u8 {
        self.labels
            .iter()
            .copied()
            .filter(|&l| l != VOID_LABEL)
            .max()
            .unwrap_or(0)
    }

    /// The largest label, void included (the official results reader counts a 255 as an id).
    pub(crate) fn max_label(&self) -> u8 {
        self.labels.iter().copied().max().unwrap_or(0)
    }

    pub(crate) fn size(&self) -> (usize, usize) {
        (self.height, self.width)
    }
}

fn check_len(height: usize, width: usize, got: usize) -> Result<(), VosError> {
    let expected = height.checked_mul(width);
    if expected == Some(got) {
        return Ok(());
    }
    Err(VosError::PixelCount {
        height,
        width,
        expected: expected.unwrap_or(usize::MAX),
        got,
    })
}

/// An error naming both sizes unless `got` equals `reference` (`height`, `width`).
pub(crate) fn check_same(
    reference: (usize, usize),
    got: (usize, usize),
    what: &str,
) -> Result<(), VosError> {
    if reference == got {
        return Ok(());
    }
    Err(VosError::SizeMismatch {
        what: what.to_string(),
        height: reference.0,
        width: reference.1,
        got_height: got.0,
        got_width: got.1,
    })
}

//! The PIDNet boundary (edge) target: which pixels are edges and how they are widened.

use serde::{Deserialize, Serialize};

use crate::error::DataError;

/// The boundary target of PIDNet (`gen_sample` in the official `base_dataset.py`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EdgeConfig {
    /// Which pixels are boundary pixels before padding and dilation.
    pub rule: EdgeRule,
    /// Side of the square dilation kernel (official `bd_dilate_size`).
    pub dilation: usize,
    /// Zero the edges within `pad_width` pixels of the border before dilating (official
    /// `edge_pad`: true for Cityscapes, false for CamVid).
    pub pad: bool,
    /// Width of that border (official `y_k_size = x_k_size = 6`).
    pub pad_width: usize,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        Self {
            rule: EdgeRule::Official,
            dilation: 4,
            pad: true,
            pad_width: 6,
        }
    }
}

/// How boundary pixels are found in a label map (`src/edges.rs` explains both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EdgeRule {
    /// `cv2.Canny(label, 0.1, 0.2)` of the official `gen_sample`, bit for bit.
    Official,
    /// A pixel whose label differs from its right or lower neighbour (segburn's rule before it
    /// matched the official one; it marks every label change and ignores the id values).
    NeighbourDiff,
}

impl EdgeConfig {
    pub(super) fn check(&self) -> Result<(), DataError> {
        if self.dilation == 0 {
            return Err(DataError::config(
                "edges.dilation",
                "must be at least 1 (1 = no dilation)",
            ));
        }
        Ok(())
    }
}

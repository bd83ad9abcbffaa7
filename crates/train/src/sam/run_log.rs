//! The metrics row of a SAM2 run; the files are written by the shared
//! [`RunLog`](crate::trainer::RunLog).

use serde::Serialize;

/// One row of the metrics files.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Sam2MetricsRow {
    /// `train` or `val`.
    pub kind: &'static str,
    pub step: u64,
    pub epoch: u64,
    pub lr: f64,
    pub loss: Option<f64>,
    pub loss_mask: Option<f64>,
    pub loss_dice: Option<f64>,
    pub loss_iou: Option<f64>,
    pub loss_class: Option<f64>,
    pub grad_norm: Option<f64>,
    pub objects: Option<usize>,
    pub seconds: Option<f64>,
    pub iou_one_click: Option<f64>,
    pub iou_one_box: Option<f64>,
    pub iou_corrected: Option<f64>,
}

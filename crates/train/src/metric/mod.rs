//! Segmentation metrics from one `u64` confusion matrix accumulated over a whole split.
//!
//! - [`ConfusionMatrix`]: rows = ground truth, columns = prediction; ground-truth pixels equal
//!   to the ignore index are skipped; mergeable across threads.
//! - [`MetricReport`]: per-class IoU / accuracy / pixel counts with class names, mIoU (the
//!   Cityscapes rule) beside the all-classes mean (the official PIDNet script's number), pixel
//!   accuracy and mean class accuracy; prints an aligned table, writes CSV and JSON.
//! - [`vos`]: the DAVIS 2017 video-object-segmentation measures J, F and J&F.

mod confusion;
mod error;
mod report;
pub mod vos;

pub use confusion::ConfusionMatrix;
pub use error::MetricError;
pub use report::{ClassMetrics, MetricReport};

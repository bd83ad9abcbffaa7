//! DAVIS 2017 video-object-segmentation measures: region similarity J, boundary accuracy F and
//! J&F, computed as the official evaluation (davisvideochallenge/davis2017-evaluation) computes
//! them, semi-supervised task.
//!
//! - [`region_similarity`] (J) and [`boundary_f_measure`] (F) of one frame's [`BinaryMask`]s;
//! - [`statistics`]: an object's mean, recall and decay over its frames (`db_statistics`);
//! - [`evaluate_sequence`] and the split accumulator [`DavisEvaluation`], whose
//!   [`DavisSummary`] is the official global table (J&F-Mean, J and F mean / recall / decay).
//!
//! Counts are exact integers and every division, sum and mean is done in the official order
//! (numpy's pairwise summation included), so the results equal the official ones bit for bit
//! on the fixtures of `tests/fixtures/vos_metrics/`. The unsupervised task (proposals matched
//! to objects by the Hungarian algorithm, void pixels left out) is not implemented.

mod error;
mod evaluation;
mod mask;
mod measures;
mod statistics;

pub use error::VosError;
pub use evaluation::{evaluate_sequence, DavisEvaluation, DavisSummary, ObjectResult};
pub use mask::{BinaryMask, LabelMap, VOID_LABEL};
pub use measures::{boundary_f_measure, region_similarity, DEFAULT_BOUND_TH, MAX_BOUND_RADIUS};
pub use statistics::{numpy_mean, numpy_sum, statistics, VosStatistics};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fixture_tests;

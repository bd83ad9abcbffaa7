//! Segmentation losses with an explicit ignore index, computed in f32 (f64 inputs stay f64).
//!
//! - [`CrossEntropyLoss`]: per-pixel, PyTorch weighted mean, or the official PIDNet
//!   all-pixel mean.
//! - [`OhemCrossEntropy`]: the official online hard example mining cross-entropy.
//! - [`BoundaryLoss`]: PIDNet's class-balanced boundary BCE (coefficient 20).
//! - [`BoundaryAwareLoss`]: OHEM on labels gated by the boundary head (BAS).
//! - [`PidNetLoss`]: the composite the official `FullModel` trains with.
//!
//! Every loss reports bad inputs (a stray class id, class weights of the wrong length) as a
//! [`LossError`], and a batch without a single usable pixel gives a zero loss with a zero
//! gradient instead of the official code's `IndexError`/NaN.

mod bas;
mod boundary;
mod class_weights;
mod config;
mod cross_entropy;
mod error;
mod ohem;
mod pidnet;
mod precision;
pub mod sam;
mod target;
#[cfg(test)]
mod test_support;

pub use bas::{boundary_gated_targets, BoundaryAwareLoss};
pub use boundary::{weighted_bce, BoundaryLoss};
pub use class_weights::{ClassWeights, WeightFormula};
pub use config::{AuxReduction, OhemConfig, PidNetLossConfig, CITYSCAPES_CLASS_WEIGHTS};
pub use cross_entropy::CrossEntropyLoss;
pub use error::LossError;
pub use ohem::OhemCrossEntropy;
pub use pidnet::{PidNetLoss, PidNetLossOutput, PidNetLossValues};
pub use target::PixelTargets;

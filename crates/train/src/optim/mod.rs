//! Optimizers with PyTorch's semantics, built on Burn's: SGD and AdamW, parameter groups,
//! learning-rate schedules, gradient unscaling and global-norm clipping, and optimizer state as
//! named tensors for checkpoints.

mod gradients;
mod lr_schedule;
mod named_state;
mod params;
mod set;
mod sgd;

pub use gradients::{unscale_and_clip, GradientSummary};
pub use lr_schedule::LrSchedule;
pub use named_state::NamedState;
pub use params::{list_params, ParamInfo};
pub use set::{AdamWSettings, OptimizerConfig, OptimizerSet, ParamGroupConfig, ParamSelector};
pub use sgd::SgdSettings;

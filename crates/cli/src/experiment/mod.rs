//! The experiment files: one RON file = one run. [`pidnet::Experiment`] and
//! [`sam2::Sam2Experiment`] are the roots (each only composes the layers' own configurations);
//! [`file`] reads them (with `--set` [`overrides`] and [`config_error`]s that point at the
//! line), and [`resume_check`] compares a run's experiment with the one a checkpoint was made
//! with.

pub mod config_error;
pub mod file;
pub mod overrides;
pub mod pidnet;
pub mod resume_check;
pub mod sam2;

pub use file::absolute;
pub use pidnet::{Experiment, ModelConfig};
pub use sam2::Sam2Experiment;

pub use crate::device::{DeviceConfig, DeviceIds, SingleDevice};

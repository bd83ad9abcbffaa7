//! The experiment files: one RON file = one run. [`pidnet::PidNetExperiment`] and
//! [`sam2::Sam2Experiment`] are the roots (each only composes the layers' own configurations);
//! [`file`] reads them (with `--set` [`overrides`] and [`config_error`]s that point at the
//! line), and [`resume_check`] is the console side of `--resume` (the engine's rules decide
//! which changes a checkpoint can follow).

pub mod config_error;
pub mod file;
pub mod overrides;
pub mod pidnet;
pub mod resume_check;
pub mod sam2;

pub use file::{absolute, ExperimentFile};
pub use pidnet::{ModelConfig, PidNetExperiment};
pub use sam2::Sam2Experiment;

pub use crate::device::{DeviceConfig, DeviceIds, SingleDevice};

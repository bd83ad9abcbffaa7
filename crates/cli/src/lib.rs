//! segburn's command-line front end. The binaries in `src/bin/` are thin: argument parsing, then
//! one call into this crate. The crate is in rooms:
//!
//! - [`commands`]: one module per command, [`commands::pidnet`] (`train`, `eval`, `predict`)
//!   and [`commands::sam2`] (`train-sam2`, `eval-sam2`, `predict-sam2`).
//! - [`device`]: the device field of an experiment and the one backend dispatcher (Flex on the
//!   CPU, CUDA after a probe) every command runs through.
//! - [`experiment`]: the experiment files (PIDNet and SAM2 roots), `--set` overrides, config
//!   errors, and the resume compatibility check.
//! - [`output`]: what the commands write for people: pictures, confusion files, plots
//!   (`plot`), progress.
//! - [`bench`]: the `bench` binary's workloads, loader throughput and suite.
//! - [`doctor`]: the `doctor` binary's checks.
//! - [`error_chain`]: the one error printer of all binaries.

pub mod bench;
pub mod commands;
pub mod device;
pub mod doctor;
pub mod error_chain;
pub mod experiment;
pub mod output;

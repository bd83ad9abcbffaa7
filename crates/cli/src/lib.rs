//! segburn's command-line front end. The binaries in `src/bin/` are thin: argument parsing, then
//! a call into this crate or the library crates.

pub mod bench;
pub mod config_error;
pub mod experiment;
pub mod overrides;
pub mod progress;
pub mod resume_check;
pub mod train_command;

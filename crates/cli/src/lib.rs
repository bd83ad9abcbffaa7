//! segburn's command-line front end. The binaries in `src/bin/` are thin: argument parsing, then
//! a call into this crate or the library crates.

pub mod bench;
pub mod bench_plan;
pub mod bench_results;
pub mod bench_suite;
pub mod config_error;
pub mod confusion_files;
pub mod doctor;
pub mod error_chain;
pub mod eval_command;
pub mod experiment;
pub mod experiment_file;
pub mod inference_args;
pub mod interrupt;
pub mod label_ids;
pub mod model_source;
pub mod overrides;
pub mod pictures;
pub mod plot;
pub mod predict_command;
pub mod progress;
pub mod resume_check;
pub mod sam2_command;
pub mod sam2_eval_command;
pub mod sam2_experiment;
pub mod sam2_predict_command;
pub mod sam2_predict_official;
pub mod sam2_predict_output;
pub mod train_command;
pub mod training;

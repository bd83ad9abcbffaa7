//! segburn-train
pub mod checkpoint;
pub mod compute_threads;
pub mod inference;
pub mod loss;
pub mod metric;
pub mod mixed_precision;
pub mod optim;
mod run_schedule;
pub mod sam;
pub mod schedule;
pub mod stop_signal;
pub mod trainer;

//! segburn-train
pub mod bench;
pub mod loss;
pub mod metric;
pub mod optim;
pub mod mixed_precision;
pub mod schedule;
pub mod checkpoint;
pub mod inference;
pub mod trainer;

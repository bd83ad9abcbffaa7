//! segburn-train
pub mod bench;
pub mod loss;
pub mod metric;
pub mod optim;

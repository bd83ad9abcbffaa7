//! segburn-train
pub mod loss;
pub mod metric;
pub mod optim;

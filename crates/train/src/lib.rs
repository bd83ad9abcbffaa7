//! segburn-train
pub mod loss;
pub mod metric;

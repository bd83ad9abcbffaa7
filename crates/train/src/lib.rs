//! segburn-train

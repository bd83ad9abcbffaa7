//! segburn-data

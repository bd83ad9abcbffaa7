//! segburn command-line front end

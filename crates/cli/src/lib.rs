//! segburn's command-line front end. The binaries in `src/bin/` are thin: argument parsing, then
//! a call into this crate or the library crates.

pub mod bench;

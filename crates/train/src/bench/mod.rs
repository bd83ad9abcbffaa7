//! Benchmarks that print numbers (never asserted on: tests check correctness, not wall time).
//! The `bench` binary drives them; the unit tests run each path once at tiny sizes so it cannot
//! rot.

mod pidnet;
mod timing;

pub use pidnet::{pidnet_eval_forward, pidnet_train_step, synthetic_targets};
pub use timing::{measure, Timing};

//! The `bench` binary: benchmarks that print numbers (never asserted on: tests check
//! correctness, not wall time). [`workloads`] are the measured pieces (a training step, a
//! forward, an inference, the trainer's own steps) and their timing and peak memory;
//! [`throughput`] times the data loader (also used by `cargo xtask bench-loader`); [`suite`]
//! runs the whole plan ([`plan`]) on one device and reports it ([`results`]); [`subcommands`]
//! are the older single-workload `bench pidnet` / `bench eval`.

pub mod plan;
pub mod results;
pub mod subcommands;
pub mod suite;
pub mod throughput;
pub mod workloads;

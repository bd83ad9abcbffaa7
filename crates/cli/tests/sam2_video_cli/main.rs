//! The video commands: `track-sam2` ([`track`]) and `eval-sam2 --video` ([`eval`]), in one test
//! binary.

#[path = "../common/mod.rs"]
mod common;

mod eval;
mod track;

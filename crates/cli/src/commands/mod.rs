//! One module per command: what `src/bin/*` calls after parsing the arguments.

pub mod interrupt;
pub mod pidnet;
pub mod sam2;
pub mod training;

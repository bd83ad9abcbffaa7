//! The PIDNet commands: `train`, `eval`, `predict`, and what eval and predict share (the
//! inference arguments, loading a model from a checkpoint or official weights).

pub mod eval;
pub mod inference_args;
pub mod model_source;
pub mod predict;
pub mod train;

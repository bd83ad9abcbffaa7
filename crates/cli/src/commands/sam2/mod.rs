//! The SAM2 commands: `train-sam2`, `eval-sam2`, `predict-sam2` (with its official-checkpoint
//! path and the files it writes) and `track-sam2` (the video predictor).

pub mod eval;
pub mod eval_video;
pub mod everything;
pub mod everything_output;
pub mod mask_input;
pub mod predict;
pub mod predict_args;
pub mod predict_official;
pub mod predict_output;
pub mod track;
pub mod track_args;
pub mod track_output;
pub mod train;

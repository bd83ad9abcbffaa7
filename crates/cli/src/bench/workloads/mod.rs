//! The measured workloads. The unit tests run each path once at tiny sizes so it cannot rot.

mod hiera;
mod peak_memory;
mod pidnet;
mod pidnet_inference;
mod pidnet_precision;
mod sam2;
mod sam2_real;
mod timing;
mod trainer_steps;

pub use hiera::{hiera_encoder_forward, hiera_finetune_step, HIERA_IMAGE_SIDE};
pub use peak_memory::{peak_rss_bytes, reset_peak_rss, with_peak_rss, PeakSource};
pub use pidnet::{pidnet_eval_forward, pidnet_train_step, synthetic_targets};
pub use pidnet_inference::pidnet_inference;
pub use pidnet_precision::{pidnet_train_step_in, Repeats};
pub use sam2::{sam2_decoder_forward, sam2_train_step, SAM2_IMAGE};
pub use sam2_real::{
    everything_candidates, sam2_everything, sam2_real_decoder, EverythingInputs, SAM2_REAL_SIDE,
};
pub use timing::{measure, Timing};
pub use trainer_steps::trainer_step_timing;

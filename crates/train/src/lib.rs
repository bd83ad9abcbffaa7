//! segburn-train: everything between a dataset and a trained model.
//!
//! Where to start:
//! - [`engine`]: the one training loop (accumulation, data-parallel replicas, mixed precision,
//!   validation and checkpoint cadence, run log, exact resume), generic over a [`engine::Task`].
//! - [`pidnet`] and [`sam2`]: the two tasks, each a [`engine::Task`] with its set-up, recipe
//!   (the `train` section's defaults), micro-batch loss, validation and weights.
//!   `PidNetTrainer::new(setup, device)?.run(&mut Silent)` trains.
//! - [`loss`] (CE, OHEM, boundary, focal, dice, SAM2's multi-step loss; all honour an
//!   ignore index), [`metric`] (one confusion matrix per split, mIoU), [`optim`] (SGD / AdamW
//!   with PyTorch's semantics, parameter groups, LR schedules, clipping), [`mixed_precision`]
//!   (precision and the dynamic loss scaler), [`checkpoint`] (the portable, verified file
//!   format, run directories, resume candidates) and [`inference`] (whole / sliding-window /
//!   multi-scale evaluation and prediction).
//! - [`compute_threads`] sizes the CPU pool; [`stop_signal`] stops a run at a step boundary.

pub mod checkpoint;
pub mod compute_threads;
pub mod engine;
pub mod inference;
pub mod loss;
pub mod metric;
pub mod mixed_precision;
pub mod optim;
pub mod pidnet;
pub mod sam2;
pub mod stop_signal;

pub use engine::TrainError;

//! Checkpoints: one self-describing safetensors file per save, readable without segburn.
//!
//! * `model.<official key>`: the model, loadable into the official PyTorch code after
//!   stripping `model.`;
//! * `optim.<official key>.<buffer>`: optimizer state keyed by parameter name;
//! * metadata: format version, the resolved experiment, the training position (step, epoch,
//!   batch within the epoch), seed, loss-scaler state, best metric and history, library
//!   versions, and a SHA-256 of all tensor data.
//!
//! Files are written to a temporary name in the same directory, fsynced, then renamed, so a
//! crash at any moment leaves either the old set of files or the new one. Loading verifies the
//! checksum: a truncated or bit-flipped file is an error, never a partial load. A failed save
//! removes its temporary file and says what is left to resume from; `--resume` without a file
//! takes the newest checkpoint that verifies. One trainer at a time holds a run directory.

mod file;
mod resolve;
mod resume_candidates;
mod run_files;
mod run_lock;
mod save_failure;
mod train_state;

pub use file::{
    load_checkpoint, save_checkpoint, Checkpoint, CheckpointError, CheckpointMeta, FORMAT_VERSION,
};
pub use resolve::{resolve_checkpoint, ResolveError};
pub use resume_candidates::{
    choose_resume_checkpoint, list_skipped, ResumeChoice, ResumeError, SkippedCheckpoint,
};
pub use run_files::{CheckpointDir, Retention, SavedCheckpoint, CHECKPOINTS_FOLDER};
pub use run_lock::{RunDirLock, RunLockError, LOCK_FILE};
pub use save_failure::PreviousCheckpoint;
pub use train_state::{SeedChanged, TrainState};

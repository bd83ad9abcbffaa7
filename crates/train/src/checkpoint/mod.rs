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
//! checksum: a truncated or bit-flipped file is an error, never a partial load.

mod file;
mod resolve;
mod run_files;

pub use file::{
    load_checkpoint, save_checkpoint, Checkpoint, CheckpointError, CheckpointMeta, TrainState,
    FORMAT_VERSION,
};
pub use resolve::{resolve_checkpoint, ResolveError};
pub use run_files::{CheckpointDir, Retention, SavedCheckpoint, CHECKPOINTS_FOLDER};

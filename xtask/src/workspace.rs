//! Where the workspace is, so that every task works from any directory. A module of its own so
//! that a task reaching for it has no arrow back up to `main.rs`, which calls the tasks.

use std::path::PathBuf;

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

//! What the binaries' end-to-end tests share: running a binary from the workspace root like a
//! user, and its output as one text.

#![allow(dead_code)] // each test file uses a part

pub mod official;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

/// Runs `binary` (a `CARGO_BIN_EXE_…` path) with `args` in the workspace root.
pub fn run<S: AsRef<OsStr>>(binary: &str, args: &[S]) -> Output {
    Command::new(binary)
        .current_dir(workspace())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"))
}

/// stdout then stderr.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A file of the repository's fixtures (`tests/fixtures`), e.g.
/// `pidnet_s/state_dict.safetensors` (formula weights are built from their key listing on first
/// use). A missing file fails with its path and the generator that writes it.
pub fn fixture(relative: &str) -> PathBuf {
    segburn_models::fixtures::fixture_path(relative)
        .unwrap_or_else(|e| panic!("fixture {relative}: {e}"))
}

/// The PIDNet-S weights of the fixtures: the official state dict's keys with formula values.
pub fn official_pidnet_weights() -> PathBuf {
    fixture("pidnet_s/state_dict.safetensors")
}

/// The run failed, printed one `error:` paragraph, and names `cause` exactly once.
pub fn assert_fails_naming_once(output: &Output, cause: &str) {
    let message = text(output);
    assert!(!output.status.success(), "{message}");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr)
            .matches("error: ")
            .count(),
        1,
        "{message}"
    );
    assert_eq!(
        message.matches(cause).count(),
        1,
        "`{cause}` once:\n{message}"
    );
}

/// The reduced SAM 2.1 model of the Hiera fixtures (official key names) at 128 px on the bundled
/// sample, encoder trained, one step, on the CPU.
pub const REDUCED_HIERA_EXPERIMENT: &str = r#"(
    model: (
        image_size: 128,
        image_encoder: Hiera(
            size: Custom(embed_dim: 32, num_heads: 1, stages: [1, 2, 3, 1],
                global_att_blocks: [5], window_spec: [8, 4, 14, 7],
                window_pos_embed_bkg_spatial_size: (7, 7)),
            drop_path_rate: 0.1,
        ),
        transformer_dim: 64,
    ),
    data: (
        source: SemanticComponents(layout: Cityscapes(root: "datasets/sample"), min_area: 400),
        batch_size: 1,
        objects_per_image: 2,
        eval_objects_per_image: 2,
    ),
    prompts: (correction_steps: 1),
    train: (epochs: 1, max_steps: Some(1), lr: 1e-4, validate_at_end: false),
)"#;

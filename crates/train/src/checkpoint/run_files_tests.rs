//! Rotation, pointers and failed saves of a run's checkpoint files, on real directories.

use super::*;
use crate::checkpoint::train_state::state_at_step;

fn touch(dir: &CheckpointDir, step: u64) -> PathBuf {
    let path = dir.file_for_step(step);
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(&path, b"x").unwrap();
    path
}

#[test]
fn rotation_keeps_the_newest_and_the_best() {
    let root = tempfile::tempdir().unwrap();
    let dir = CheckpointDir::new(root.path().join("run été").join("checkpoints"));
    for step in [10, 20, 30, 40] {
        let path = touch(&dir, step);
        dir.set_latest(&path).unwrap();
    }
    dir.set_best(&dir.file_for_step(20)).unwrap();
    std::fs::write(
        dir.path().join(".step_00000050.safetensors.partial"),
        b"half",
    )
    .unwrap();
    let deleted = dir.rotate(&Retention {
        keep_last: 1,
        keep_best: true,
    });
    let remaining: Vec<u64> = dir.list().into_iter().map(|(s, _)| s).collect();
    assert_eq!(remaining, [20, 40]);
    assert_eq!(deleted.len(), 2);
    assert_eq!(dir.latest(), Some(dir.file_for_step(40)));
    assert!(!dir
        .path()
        .join(".step_00000050.safetensors.partial")
        .exists());
}

fn save(dir: &CheckpointDir, step: u64) -> Result<SavedCheckpoint, CheckpointError> {
    let state = state_at_step(step);
    let model = NamedTensors::from([(
        "conv.weight".to_string(),
        burn::tensor::TensorData::new(vec![0.5f32; 1000], [1000]),
    )]);
    dir.save_step(
        &state,
        "()",
        &model,
        &NamedTensors::new(),
        &Retention::default(),
    )
}

/// A real ENOSPC without a small file system: the temporary file is a link to /dev/full.
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_removes_the_partial_file_and_names_what_is_intact_and_needed() {
    let root = tempfile::tempdir().unwrap();
    let dir = CheckpointDir::new(root.path().join("run été").join("checkpoints"));
    std::fs::create_dir_all(root.path().join("run été")).unwrap();
    let first = save(&dir, 1).unwrap();
    let partial = dir.path().join(".step_00000002.safetensors.partial");
    std::os::unix::fs::symlink("/dev/full", &partial).unwrap();
    let error = save(&dir, 2).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, CheckpointError::Save { error, .. }
            if error.kind() == std::io::ErrorKind::StorageFull),
        "{message}"
    );
    assert!(message.contains("the disk is full"), "{message}");
    assert!(
        message.contains(&format!("{} bytes", first.bytes)),
        "the space a checkpoint needs: {message}"
    );
    assert!(
        message.contains(&format!("{}, is intact", first.path.display())),
        "{message}"
    );
    assert_eq!(
        message.matches("os error 28").count(),
        1,
        "the cause is said once: {message}"
    );
    assert!(
        partial.symlink_metadata().is_err(),
        "the partial file is gone"
    );
    assert_eq!(dir.latest(), Some(first.path));
}

#[test]
fn a_vanished_run_directory_is_reported_not_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let run_dir = root.path().join("run été");
    let dir = CheckpointDir::new(run_dir.join("checkpoints"));
    std::fs::create_dir_all(&run_dir).unwrap();
    save(&dir, 1).unwrap();
    std::fs::remove_dir_all(&run_dir).unwrap();
    let message = save(&dir, 2).unwrap_err().to_string();
    assert!(
        message.contains("the directory is gone") && message.contains("no longer exists"),
        "{message}"
    );
    assert!(
        !run_dir.exists(),
        "the vanished run directory was not recreated"
    );

    // A run directory that is a file: creating `checkpoints/` in it fails the same way.
    std::fs::write(&run_dir, b"not a directory").unwrap();
    let message = save(&dir, 3).unwrap_err().to_string();
    assert!(
        message.contains("creating the directory") && message.contains("run été"),
        "{message}"
    );
}

#[test]
fn keep_last_zero_still_keeps_the_newest() {
    let root = tempfile::tempdir().unwrap();
    let dir = CheckpointDir::new(root.path());
    touch(&dir, 1);
    touch(&dir, 2);
    dir.rotate(&Retention {
        keep_last: 0,
        keep_best: false,
    });
    assert_eq!(dir.list().len(), 1);
    // Without a pointer, the highest step on disk is the latest.
    assert_eq!(dir.latest(), Some(dir.file_for_step(2)));
}

//! `train-sam2` on data-parallel replicas and with gradient accumulation, through the binary:
//! the same steps bit for bit, and the resume and config rules around them.

mod common;

use common::{run, text};

const TRAIN: &str = env!("CARGO_BIN_EXE_train-sam2");

/// `device: CpuReplicas(2)` and `train.grad_accum: 2` take the same steps through the binary
/// (bit for bit), a resume that changes the micro-batches per step is refused, and a field
/// that moved out of the shared `train` section says where it lives now.
#[test]
fn replicas_and_accumulation_take_the_same_steps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run_dir = |name: &str| dir.path().join("données d'essai").join(name);
    let train = |name: &str, extra: &[&str]| {
        let run_dir = format!("train.run_dir={}", run_dir(name).display());
        let mut args = vec![
            "configs/sam2_decoder.ron",
            "--quiet",
            "--set",
            "train.max_steps=2",
            "--set",
            "train.validate_at_end=false",
            "--set",
            &run_dir,
        ];
        args.extend_from_slice(extra);
        run(TRAIN, &args)
    };
    let replicas = train("replicas", &["--set", "device=CpuReplicas(2)"]);
    assert!(replicas.status.success(), "{}", text(&replicas));
    assert!(
        text(&replicas).contains("on each of 2 device(s) as data-parallel replicas"),
        "{}",
        text(&replicas)
    );
    let accumulated = train("accumulated", &["--set", "train.grad_accum=2"]);
    assert!(accumulated.status.success(), "{}", text(&accumulated));
    let model = |name: &str| {
        let path = run_dir(name)
            .join("checkpoints")
            .join("step_00000002.safetensors");
        segburn_train::checkpoint::load_checkpoint(&path)
            .expect("checkpoint")
            .model
    };
    let (a, b) = (model("replicas"), model("accumulated"));
    assert_eq!(a.len(), b.len());
    for (key, value) in &a {
        assert_eq!(value.as_bytes(), b[key].as_bytes(), "{key} differs");
    }

    // One device without accumulation takes 1 micro-batch per step, not 2.
    let narrowed = train("replicas", &["--set", "train.max_steps=4", "--resume"]);
    assert!(!narrowed.status.success());
    assert!(
        text(&narrowed).contains("micro-batches per step (train.grad_accum × devices): 2 -> 1"),
        "{}",
        text(&narrowed)
    );

    let config = dir.path().join("old.ron");
    std::fs::write(
        &config,
        "(\n    train: (lr: 0.001, eval_corrections: 2),\n)\n",
    )
    .expect("write");
    let old = run(TRAIN, &[config.to_str().expect("utf8")]);
    assert!(!old.status.success());
    assert!(
        text(&old).contains("`eval_corrections` has moved to `prompts.eval_corrections`"),
        "{}",
        text(&old)
    );
}

//! SAM2 through the engine's accumulation and data-parallel paths: two CPU replicas take
//! exactly the steps of one device accumulating two micro-batches (model, optimizer state and
//! position bit for bit), and a run resumes across device counts in both directions.

use std::path::Path;

use burn::backend::{Autodiff, Flex};

use super::tests::{assert_same_run, tiny_setup};
use super::*;
use crate::engine::replicas::one_pool_at_a_time;
use crate::engine::Silent;

type A = Autodiff<Flex>;

/// The shared tiny run with `grad_accum` micro-batches per device and step.
fn setup(run_dir: &Path, max_steps: u64, grad_accum: usize) -> Sam2Setup {
    let mut setup = tiny_setup(run_dir, max_steps);
    setup.train.grad_accum = grad_accum;
    setup
}

/// The weights every run here starts from. Two fresh runs with one seed start alike only
/// while no other test draws from Burn's process-wide random stream, so each run loads them.
fn initial_weights(root: &Path) -> std::path::PathBuf {
    let mut fresh = Sam2Trainer::<A>::new(setup(&root.join("initial"), 1, 1), Default::default())
        .expect("trainer");
    fresh.save(&mut Silent).expect("initial checkpoint")
}

/// A run on `devices` replicas from `initial`, trained to its end.
fn trained(setup: Sam2Setup, devices: usize, initial: &Path) -> Sam2Trainer<A> {
    let mut trainer =
        Sam2Trainer::<A>::with_devices(setup, vec![Default::default(); devices]).expect("trainer");
    trainer.init_weights_from(initial).expect("initial weights");
    trainer.run(&mut Silent).expect("training");
    trainer
}

#[test]
fn two_replicas_take_the_steps_of_one_device_accumulating_two() {
    let _turn = one_pool_at_a_time();
    let root = tempfile::tempdir().expect("temp dir");
    let initial = initial_weights(root.path());
    let single = trained(setup(&root.path().join("single"), 3, 2), 1, &initial);
    let parallel = trained(setup(&root.path().join("parallel"), 3, 1), 2, &initial);
    assert_eq!(parallel.steps_per_epoch(), single.steps_per_epoch());
    assert_eq!(
        single.state().batch_in_epoch,
        6,
        "3 steps of 2 micro-batches"
    );
    let log =
        std::fs::read_to_string(root.path().join("parallel").join("train.log")).expect("train.log");
    assert!(
        log.contains("on each of 2 device(s) as data-parallel replicas"),
        "{log}"
    );
    let weights = assert_same_run(&single, &parallel);
    // Not vacuous: the three steps moved the weights.
    let start = crate::checkpoint::load_checkpoint(&initial)
        .expect("initial checkpoint")
        .model;
    let moved = weights
        .iter()
        .filter(|(key, value)| value.as_bytes() != start[key.as_str()].as_bytes())
        .count();
    assert!(
        moved > weights.len() / 2,
        "{moved} of {} moved",
        weights.len()
    );
}

#[test]
fn a_run_resumes_across_device_counts_bit_for_bit() {
    let _turn = one_pool_at_a_time();
    let root = tempfile::tempdir().expect("temp dir");
    let dir = |name: &str| root.path().join(name);
    let initial = initial_weights(root.path());
    let straight = trained(setup(&dir("straight"), 4, 2), 1, &initial);

    // Two steps on two replicas, then two more on one device accumulating two.
    let two = trained(setup(&dir("two"), 2, 1), 2, &initial);
    let checkpoint = two.checkpoint_dir().latest().expect("checkpoint");
    drop(two);
    let mut narrowed =
        Sam2Trainer::<A>::new(setup(&dir("narrowed"), 4, 2), Default::default()).expect("trainer");
    narrowed.resume(&checkpoint).expect("resume on one device");
    narrowed.run(&mut Silent).expect("training");
    assert_same_run(&straight, &narrowed);

    // And the other way: two steps on one device, two more on two replicas.
    let one = trained(setup(&dir("one"), 2, 2), 1, &initial);
    let checkpoint = one.checkpoint_dir().latest().expect("checkpoint");
    drop(one);
    let mut widened =
        Sam2Trainer::<A>::with_devices(setup(&dir("widened"), 4, 1), vec![Default::default(); 2])
            .expect("trainer");
    widened.resume(&checkpoint).expect("resume on two replicas");
    widened.run(&mut Silent).expect("training");
    assert_same_run(&straight, &widened);
}

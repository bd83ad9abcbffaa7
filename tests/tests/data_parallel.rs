//! Data-parallel training on Burn's collective all-reduce, on Flex replicas: two devices with
//! micro-batch b take the same steps as one device accumulating 2 × b, a two-device run
//! stopped mid-epoch resumes on one device and a one-device run on two, and one device through the replica machinery
//! takes exactly the plain path's steps.

mod common;

use common::tiny_setup;
use std::path::Path;

use burn::backend::{Autodiff, Flex};
use segburn_models::fixtures::{max_abs, max_abs_diff};
use segburn_models::pidnet::{pidnet_state_dict, PidNetConfig, PidNetSize};
use segburn_models::tensor_file::NamedTensors;
use segburn_models::weights::is_buffer_key;
use segburn_train::engine::Silent;
use segburn_train::pidnet::{PidNetSetup, PidNetTrainer};

type AD = Autodiff<Flex>;

/// Burn's collective is process-wide and the trainer allows one data-parallel run at a time,
/// so the tests here take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn setup(run_dir: &Path, max_steps: u64, grad_accum: usize) -> PidNetSetup {
    tiny_setup(run_dir, |train| {
        train.epochs = 4;
        train.max_steps = Some(max_steps);
        train.grad_accum = grad_accum;
    })
}

/// Largest difference between the trainable parameters, relative to the largest value
/// (infinite when either side holds a NaN or an infinity).
fn parameter_gap(a: &NamedTensors, b: &NamedTensors) -> f64 {
    let mut gap = 0.0f64;
    let mut scale = 0.0f64;
    for (key, value) in a.iter().filter(|(k, _)| !is_buffer_key(k)) {
        let x: Vec<f64> = value.iter::<f64>().collect();
        let y: Vec<f64> = b[key].iter::<f64>().collect();
        gap = gap.max(max_abs_diff(&x, &y));
        scale = scale.max(max_abs(&x));
    }
    gap / scale
}

#[test]
fn two_replicas_match_one_device_with_accumulation_and_resume_on_one_device() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let device = Default::default();

    // 6 micro-batches per epoch, 2 per step: stopping after 2 steps is mid-epoch.
    let mut single =
        PidNetTrainer::<AD>::new(setup(&root.path().join("single"), 2, 2), device).unwrap();
    single.run(&mut Silent).unwrap();
    let reference = pidnet_state_dict(single.model());

    let mut parallel = PidNetTrainer::<AD>::with_devices(
        setup(&root.path().join("parallel"), 2, 1),
        vec![device; 2],
    )
    .unwrap();
    assert_eq!(parallel.steps_per_epoch(), single.steps_per_epoch());
    parallel.run(&mut Silent).unwrap();
    let position = |t: &PidNetTrainer<AD>| (t.state().epoch, t.state().batch_in_epoch);
    assert_eq!(position(&single), (0, 4));
    assert_eq!(position(&parallel), (0, 4), "the loader position is kept");
    let log = std::fs::read_to_string(root.path().join("parallel").join("train.log")).unwrap();
    assert!(log.contains("on each of 2 device(s)"), "{log}");
    let gap = parameter_gap(&reference, &pidnet_state_dict(parallel.model()));
    println!("2 replicas vs 1 device with grad_accum 2, after 2 steps: relative gap {gap:e}");
    assert!(gap < 1e-4, "parameters differ by {gap:e}");
    let start = pidnet_state_dict(&PidNetConfig::new(PidNetSize::S, 19).init::<AD>(&device));
    assert!(
        parameter_gap(&reference, &start) > 1e-3,
        "the comparison is not vacuous"
    );

    // The two-device checkpoint at step 2 continues on one device accumulating 2 micro-batches,
    // across the epoch boundary.
    let checkpoint = parallel.checkpoint_dir().latest().unwrap();
    drop(parallel);
    let mut resumed =
        PidNetTrainer::<AD>::new(setup(&root.path().join("resumed"), 5, 2), device).unwrap();
    resumed.resume(&checkpoint).unwrap();
    resumed.run(&mut Silent).unwrap();
    let mut straight =
        PidNetTrainer::<AD>::new(setup(&root.path().join("straight"), 5, 2), device).unwrap();
    straight.run(&mut Silent).unwrap();
    assert_eq!(resumed.state().step, 5);
    assert_eq!(position(&resumed), position(&straight));
    assert_eq!(position(&resumed), (1, 4));
    let gap = parameter_gap(
        &pidnet_state_dict(straight.model()),
        &pidnet_state_dict(resumed.model()),
    );
    println!("resumed on one device after 2 steps on two, after 5 steps: relative gap {gap:e}");
    assert!(gap < 1e-4, "parameters differ by {gap:e}");

    // And the other way: the one-device checkpoint at step 2 continues on two devices.
    let checkpoint = single.checkpoint_dir().latest().unwrap();
    drop(single);
    let mut widened = PidNetTrainer::<AD>::with_devices(
        setup(&root.path().join("widened"), 5, 1),
        vec![device; 2],
    )
    .unwrap();
    widened.resume(&checkpoint).unwrap();
    widened.run(&mut Silent).unwrap();
    assert_eq!(position(&widened), (1, 4));
    let gap = parameter_gap(
        &pidnet_state_dict(straight.model()),
        &pidnet_state_dict(widened.model()),
    );
    println!("resumed on two devices after 2 steps on one, after 5 steps: relative gap {gap:e}");
    assert!(gap < 1e-4, "parameters differ by {gap:e}");
}

/// `CpuReplicas(1)` / `Cuda([0])`: the worker thread, the parameter copy and the all-reduce
/// (a mean over one replica) change nothing, bit for bit.
#[test]
fn one_device_through_the_replica_machinery_takes_the_plain_steps() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let device = Default::default();
    let mut plain =
        PidNetTrainer::<AD>::new(setup(&root.path().join("plain"), 2, 1), device).unwrap();
    plain.run(&mut Silent).unwrap();
    let mut replicated =
        PidNetTrainer::<AD>::new(setup(&root.path().join("replicated"), 2, 1), device)
            .unwrap()
            .replicate_single_device(true);
    replicated.run(&mut Silent).unwrap();
    let log = |run: &str| std::fs::read_to_string(root.path().join(run).join("train.log")).unwrap();
    assert!(log("replicated").contains("on each of 1 device(s) as data-parallel replicas"));
    assert!(!log("plain").contains("data-parallel"));
    let (a, b) = (
        pidnet_state_dict(plain.model()),
        pidnet_state_dict(replicated.model()),
    );
    let start = pidnet_state_dict(&PidNetConfig::new(PidNetSize::S, 19).init::<AD>(&device));
    assert!(
        parameter_gap(&a, &start) > 1e-3,
        "the comparison is not vacuous"
    );
    for (key, value) in a.iter() {
        let same = value
            .iter::<f32>()
            .zip(b[key].iter::<f32>())
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same,
            "{key} differs between the plain and the replicated step"
        );
    }
    assert_eq!(
        replicated.state().batch_in_epoch,
        plain.state().batch_in_epoch
    );
}

/// Validation during a data-parallel run evaluates the replicas' current model, not the copy
/// from the last checkpoint.
#[test]
fn validation_during_a_replicated_run_sees_the_current_model() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let root = tempfile::tempdir().unwrap();
    let device = Default::default();
    let mut with_validation = tiny_setup(&root.path().join("validated"), |train| {
        train.epochs = 4;
        train.max_steps = Some(2);
        train.validate_every_steps = Some(1);
    });
    with_validation.train.lr = 0.05;
    let mut parallel = PidNetTrainer::<AD>::with_devices(with_validation, vec![device; 2]).unwrap();
    parallel.run(&mut Silent).unwrap();
    let history = parallel.state().history.clone();
    assert_eq!(
        history.iter().map(|(step, _)| *step).collect::<Vec<_>>(),
        [1, 2]
    );
    // The run's model is the replicas' model after step 2: validating it again must give the
    // number recorded at step 2.
    let again = parallel.validate().unwrap().mean_iou;
    println!("mIoU recorded at steps 1, 2: {history:?}; the final model again: {again}");
    assert_eq!(history[1].1, again, "step 2 was validated on another model");
    assert_ne!(history[0].1, history[1].1, "the comparison is not vacuous");
}

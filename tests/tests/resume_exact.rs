//! An interrupted and resumed run ends bit-identical to an uninterrupted one (CPU, f32): the
//! model, BatchNorm statistics, optimizer state and position all match, with a stop in the
//! middle of an epoch, an epoch boundary after it, and gradient accumulation; and with a stop
//! requested (as Ctrl-C does) on the last step of an epoch.

mod common;

use common::tiny_setup;
use std::path::Path;

use burn::backend::{Autodiff, Flex};
use segburn_models::fixtures::max_abs_diff;
use segburn_models::pidnet::pidnet_state_dict;
use segburn_models::tensor_file::NamedTensors;
use segburn_train::engine::{Silent, TrainEvent};
use segburn_train::pidnet::{PidNetEvent, PidNetSetup, PidNetTrainer};
use segburn_train::stop_signal::StopSignal;

type AD = Autodiff<Flex>;

/// The 12 sample validation images as a training split: with batches of 2 and grad_accum 2
/// an epoch is 3 optimizer steps, so 5 steps cross an epoch boundary.
fn setup(run_dir: &Path, max_steps: u64) -> PidNetSetup {
    tiny_setup(run_dir, |train| {
        train.epochs = 4;
        train.max_steps = Some(max_steps);
        train.grad_accum = 2;
        train.log_every_steps = 1;
    })
}

fn bytes(tensors: &NamedTensors) -> Vec<(String, Vec<u8>)> {
    tensors
        .iter()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn stop_and_resume_equals_an_uninterrupted_run() {
    let root = tempfile::tempdir().unwrap();
    let device = Default::default();

    let straight_dir = root.path().join("straight");
    let mut straight = PidNetTrainer::<AD>::new(setup(&straight_dir, 5), device).unwrap();
    straight.run(&mut Silent).unwrap();

    let resumed_dir = root.path().join("resumed run données");
    let mut first = PidNetTrainer::<AD>::new(setup(&resumed_dir, 2), device).unwrap();
    first.run(&mut Silent).unwrap();
    assert_eq!(
        first.state().batch_in_epoch,
        4,
        "the stop is in the middle of the first epoch"
    );
    let checkpoint = first
        .checkpoint_dir()
        .latest()
        .expect("a checkpoint at the stop");
    let at_stop = segburn_train::checkpoint::load_checkpoint(&checkpoint)
        .unwrap()
        .model;
    drop(first);

    let mut second = PidNetTrainer::<AD>::new(setup(&resumed_dir, 5), device).unwrap();
    second.resume(&checkpoint).unwrap();
    assert_eq!(second.state().step, 2);
    second.run(&mut Silent).unwrap();

    assert_eq!(second.state().step, 5);
    assert_eq!(second.state().epoch, 1, "the run crossed an epoch boundary");
    assert_eq!(second.state(), straight.state());
    let model_a = pidnet_state_dict(straight.model());
    let model_b = pidnet_state_dict(second.model());
    assert_eq!(model_a.len(), 479);
    let differing: Vec<String> = model_a
        .iter()
        .filter(|(k, v)| v.as_bytes() != model_b[*k].as_bytes())
        .map(|(k, v)| {
            let a: Vec<f64> = v.iter::<f64>().collect();
            let b: Vec<f64> = model_b[k].iter::<f64>().collect();
            let d = max_abs_diff(&a, &b);
            format!("{k} ({d:e})")
        })
        .collect();
    assert!(
        differing.is_empty(),
        "{} model tensors differ after resume: {:?}",
        differing.len(),
        &differing[..differing.len().min(8)]
    );
    let optim_a = straight.optimizer_state().unwrap();
    let optim_b = second.optimizer_state().unwrap();
    assert_eq!(
        optim_a.len(),
        242,
        "one momentum buffer per trained parameter"
    );
    assert!(
        bytes(&optim_a) == bytes(&optim_b),
        "optimizer state differs after resume"
    );

    // Not vacuous: the resumed part of the run did change the model.
    assert!(
        bytes(&at_stop) != bytes(&model_b),
        "steps 3..5 changed the weights"
    );

    // A stop requested during step 3, the last of the first epoch: the run finishes the step,
    // saves it, and leaves the epoch's end to the resumed run.
    let stopped_dir = root.path().join("stopped");
    let stop = StopSignal::new();
    let mut first = PidNetTrainer::<AD>::new(setup(&stopped_dir, 5), device)
        .unwrap()
        .with_stop_signal(stop.clone());
    let summary = first
        .run(&mut |event: &PidNetEvent| {
            if matches!(event, TrainEvent::Step(r) if r.step == 3) {
                stop.request();
            }
        })
        .unwrap();
    assert!(summary.stopped, "{summary:?}");
    assert_eq!((summary.steps, first.state().epoch), (3, 0));
    let checkpoint = summary.last_checkpoint.expect("a checkpoint at the stop");
    drop(first);
    let mut second = PidNetTrainer::<AD>::new(setup(&stopped_dir, 5), device).unwrap();
    second.resume(&checkpoint).unwrap();
    let summary = second.run(&mut Silent).unwrap();
    assert!(!summary.stopped);
    assert_eq!(second.state(), straight.state());
    assert!(bytes(&pidnet_state_dict(second.model())) == bytes(&model_a));
    assert!(bytes(&second.optimizer_state().unwrap()) == bytes(&optim_a));
}

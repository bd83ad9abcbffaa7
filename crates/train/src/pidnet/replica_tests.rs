//! PIDNet through the engine's data-parallel replicas: a replica whose step panics fails the
//! step instead of leaving its peers waiting in the all-reduce.

use std::sync::mpsc::channel;
use std::time::Duration;

use burn::backend::{Autodiff, Flex};
use segburn_data::{Batch, DataConfig, Layout};
use segburn_models::pidnet::{PidNetConfig, PidNetSize};

use super::{PidNetSetup, PidNetTask, PidNetTrainConfig};
use crate::engine::initial_weights::seeded_initial_model;
use crate::engine::replicas::{
    one_pool_at_a_time, ReplicaPool, ReplicaSource, Share, StepSettings,
};
use crate::engine::Task;
use crate::loss::PidNetLossConfig;

type AD = Autodiff<Flex>;

/// PIDNet-S on the bundled sample dataset, official recipe, no validation.
pub(super) fn sample_setup() -> PidNetSetup {
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
    PidNetSetup {
        model: PidNetConfig::new(PidNetSize::S, 19),
        data: DataConfig {
            layout: Layout::Cityscapes { root: sample },
            ..DataConfig::default()
        },
        loss: PidNetLossConfig::default(),
        train: PidNetTrainConfig {
            validate_at_end: false,
            validate_every_epochs: 0,
            ..PidNetTrainConfig::default()
        },
        experiment_text: String::new(),
    }
}

fn batch(index: usize, images: usize) -> Batch {
    let (h, w) = (64, 64);
    Batch {
        epoch: 0,
        index,
        batch_size: 1,
        height: h,
        width: w,
        images: vec![0.5; images],
        labels: vec![1; h * w],
        edges: vec![0; h * w],
        names: vec![format!("sample {index}")],
        sample_indices: vec![index],
    }
}

/// A replica whose step panics reports it as an error, and its peers are not left waiting
/// in the all-reduce.
#[test]
fn a_panicking_replica_fails_the_step_instead_of_hanging_its_peers() {
    let _turn = one_pool_at_a_time();
    let device = Default::default();
    let setup = sample_setup();
    let task = PidNetTask::new(&setup).expect("the sample dataset");
    // Drawn as the engine draws (under the random stream's lock), so that a seeded test running
    // beside this one keeps its weights.
    let model = seeded_initial_model::<AD, _>(&task, &device, 0).expect("initial model");
    let params = Task::<AD>::trained_params(&task, &model);
    let state = Task::<AD>::optimizer(&task, &params)
        .expect("optimizer")
        .export(&device);
    let source = ReplicaSource {
        task: &task,
        model: &model,
        optimizer_state: &state,
    };
    let pool = ReplicaPool::<AD, _>::spawn(source, &[device, device]).unwrap();
    let settings = StepSettings {
        lr: 0.01,
        scale: 1.0,
        clip: None,
        dtype: burn::tensor::FloatDType::F32,
        seed: 0,
        step: 0,
    };
    // Replica 1's image buffer is too short for its shape: building the tensor panics.
    let shares = vec![
        Share {
            batches: vec![batch(0, 3 * 64 * 64)],
            first_index: 0,
        },
        Share {
            batches: vec![batch(1, 10)],
            first_index: 1,
        },
    ];
    let (done, outcome) = channel();
    std::thread::spawn(move || {
        let _ = done.send(pool.step(shares, settings).err().map(|e| e.to_string()));
    });
    let error = outcome
        .recv_timeout(Duration::from_secs(300))
        .expect("the step returned instead of hanging")
        .expect("the step failed");
    assert!(
        error.contains("replica 1 panicked during its step"),
        "{error}"
    );
}

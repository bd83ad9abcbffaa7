//! A seed's initial weights are drawn on the host and moved to the training device, so every
//! device starts from the same model (a GPU's own random generator would draw others).

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};

use super::replica_tests::sample_setup;
use super::PidNetTask;
use crate::engine::initial_weights::{host_initial_weights, on_device, random_stream};
use crate::engine::Task;

/// Another backend type on the same CPU: it takes the move from the host, as a GPU does.
type OtherDevice = Autodiff<Flex, BalancedCheckpointing>;

/// Every tensor drawn on the host arrives on the other device bit for bit, under its name.
/// (Compared with one draw: other tests draw from Burn's process-wide stream too.)
#[test]
fn the_host_initial_weights_arrive_unchanged_on_another_device() {
    let task = PidNetTask::new(&sample_setup()).expect("the sample dataset");
    let (on_host, other_seed) = {
        let _turn = random_stream();
        (
            host_initial_weights(&task, 7),
            host_initial_weights(&task, 8),
        )
    };
    let moved = on_device::<OtherDevice, _>(&task, &on_host, &Default::default())
        .expect("moved to the other device");
    let moved = Task::<OtherDevice>::export_model(&task, &moved);
    assert_eq!(
        on_host.keys().collect::<Vec<_>>(),
        moved.keys().collect::<Vec<_>>()
    );
    for (key, data) in &on_host {
        assert_eq!(data, &moved[key], "{key} differs after the move");
    }
    // The comparison can fail: another seed draws other weights, and an unloaded model
    // would keep its own.
    let conv = "conv1.0.weight";
    assert_ne!(on_host[conv], other_seed[conv]);
}

//! Checkpoint size and save/load time for PIDNet-S/M/L with SGD momentum state.
//! `cargo run --release -p segburn-train --example checkpoint_bench -- [dir]`

use std::time::Instant;

use burn::backend::Flex;
use segburn_models::pidnet::{pidnet_state_dict, PidNetConfig, PidNetSize};
use segburn_models::tensor_file::NamedTensors;
use segburn_models::weights::is_buffer_key;
use segburn_train::checkpoint::{
    load_checkpoint, save_checkpoint, CheckpointMeta, TrainState, FORMAT_VERSION,
};
use segburn_train::mixed_precision::{LossScaler, LossScalerConfig};

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    for size in [PidNetSize::S, PidNetSize::M, PidNetSize::L] {
        let model =
            pidnet_state_dict(&PidNetConfig::new(size, 19).init::<Flex>(&Default::default()));
        // Momentum buffers have the shape of the trained parameters.
        let optimizer: NamedTensors = model
            .iter()
            .filter(|(k, _)| !is_buffer_key(k))
            .map(|(k, v)| (format!("optim.{k}.momentum_buffer"), v.clone()))
            .collect();
        let meta = CheckpointMeta {
            format_version: FORMAT_VERSION,
            state: TrainState {
                step: 1,
                epoch: 0,
                batch_in_epoch: 1,
                seed: 304,
                loss_scaler: LossScaler::new(LossScalerConfig::default(), false),
                best_metric: None,
                history: Vec::new(),
                micro_batches_per_step: None,
            },
            config: String::new(),
            segburn_version: env!("CARGO_PKG_VERSION").into(),
            burn_version: "0.21.0".into(),
        };
        let path = dir.join(format!("checkpoint_bench_{size:?}.safetensors"));
        let started = Instant::now();
        let bytes = save_checkpoint(&path, &model, &optimizer, &meta).expect("save");
        let save = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let loaded = load_checkpoint(&path).expect("load");
        let load = started.elapsed().as_secs_f64();
        assert_eq!(loaded.model.len(), model.len());
        println!(
            "PIDNet-{size:?}: {:.1} MB, save {:.2} s (incl. fsync), load + verify {:.2} s",
            bytes as f64 / 1e6,
            save,
            load
        );
        let _ = std::fs::remove_file(&path);
    }
}

//! The workloads that read a dataset (`plan.loader_data`): the trainer's steps, plain and
//! through the data-parallel replica path, and the threaded loader alone.

use burn::tensor::backend::AutodiffBackend;
use segburn_data::{DataConfig, DatasetIndex, Layout};
use segburn_models::pidnet::{PidNetConfig, PidNetSize};
use segburn_train::loss::PidNetLossConfig;
use segburn_train::mixed_precision::Precision;
use segburn_train::pidnet::{PidNetSetup, PidNetTrainConfig};

use super::row_spec::{precision_name, row, RowSpec};
use crate::bench::plan::SuitePlan;
use crate::bench::results::SuiteRow;
use crate::bench::workloads::{trainer_step_timing, with_peak_rss, Timing};

/// The plan's crop and batch over `plan.loader_data` (its val split for `--smoke`).
fn bench_data(plan: &SuitePlan) -> (DataConfig, &'static str) {
    let mut config = DataConfig {
        layout: Layout::Cityscapes {
            root: plan.loader_data.clone(),
        },
        ..DataConfig::default()
    };
    [config.augment.crop_height, config.augment.crop_width] = plan.crop;
    if plan.smoke {
        config.augment.base_size = 256;
    }
    config.train_loader.batch_size = plan.batch;
    let split = if plan.smoke { "val" } else { "train" };
    config.train_split = split.into();
    (config, split)
}

/// Trainer steps of `size` in `precision` on the sample data, plain and then through the
/// data-parallel replica path on the same device (`CpuReplicas(1)` / `Cuda([0])`).
pub(super) fn replica_rows<B: AutodiffBackend>(
    plan: &SuitePlan,
    size: PidNetSize,
    precision: Precision,
    device: &B::Device,
    cuda_memory_note: Option<&str>,
) -> Result<Vec<SuiteRow>, String> {
    let (mut data, _) = bench_data(plan);
    // The sample's images are 512 wide: augment around their own size.
    data.augment.base_size = data.augment.base_size.min(512);
    let run_dir = tempfile::Builder::new()
        .prefix("segburn-bench-")
        .tempdir()
        .map_err(|e| format!("replicas benchmark: no temporary folder: {e}"))?;
    let [h, w] = plan.crop;
    let mut loss = PidNetLossConfig::default();
    // Keep the official share of OHEM pixels (131072 of 12 × 1024 × 1024 ≈ 1 %).
    loss.ohem.min_kept = (plan.batch * h * w / 96).max(1);
    let mut rows = Vec::new();
    for (replicated, label) in [(false, "plain"), (true, "dp")] {
        let setup = PidNetSetup {
            model: PidNetConfig::new(size, 19),
            data: data.clone(),
            loss: loss.clone(),
            train: PidNetTrainConfig {
                epochs: 1000,
                precision,
                run_dir: run_dir.path().join(label),
                ..PidNetTrainConfig::default()
            },
            experiment_text: String::new(),
        };
        let (timing, peak) = with_peak_rss(|| {
            trainer_step_timing::<B>(setup, device.clone(), replicated, plan.repeats)
        });
        let timing = timing.map_err(|e| format!("replicas benchmark: {e}"))?;
        let spec = RowSpec {
            workload: "replicas",
            model: format!("PIDNet-{size:?}"),
            precision: precision_name(precision),
            shape: format!("{label}/{}x3x{h}x{w}", plan.batch),
            unit: "steps/s",
            items_per_run: 1.0,
        };
        rows.push(row(spec, &timing, peak, cuda_memory_note));
    }
    Ok(rows)
}

/// The threaded loader over the training split of `plan.loader_data` with the plan's crop
/// and batch, one worker per core (host memory: always RSS).
pub(super) fn loader_row(plan: &SuitePlan) -> Result<SuiteRow, String> {
    let (mut config, split) = bench_data(plan);
    config.train_loader.drop_last = false;
    let index = DatasetIndex::new(&config.layout, split, config.ignore_index).map_err(|e| {
        format!("loader benchmark: {e} (choose a Cityscapes-layout dataset with --loader-data DIR)")
    })?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let epochs = if plan.smoke { 1 } else { 2 };
    let (rate, peak) =
        with_peak_rss(|| crate::bench::throughput::time_loader(&index, &config, workers, epochs));
    let rate = rate.map_err(|e| format!("loader benchmark: {e}"))?;
    let seconds_per_image = rate.wall_seconds / rate.images.max(1) as f64;
    let timing = Timing {
        runs_ms: vec![rate.wall_seconds * 1e3],
        median_ms: seconds_per_image * 1e3,
        min_ms: seconds_per_image * 1e3,
    };
    let name = plan
        .loader_data
        .file_name()
        .map_or("data".into(), |n| n.to_string_lossy().into_owned());
    let spec = RowSpec {
        workload: "loader",
        model: name,
        precision: "-",
        shape: format!(
            "{}x3x{}x{}/{workers}w",
            plan.batch, plan.crop[0], plan.crop[1]
        ),
        unit: "images/s",
        items_per_run: 1.0,
    };
    Ok(row(spec, &timing, peak, None))
}

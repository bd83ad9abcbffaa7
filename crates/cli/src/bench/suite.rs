//! The benchmark suite behind `bench [--device cpu|cuda:N] [--sizes s,m,l]
//! [--precision f32,bf16,f16] [--crop H,W] [--batch N] [--smoke] [--json FILE]
//! [--compare FILE]`: PIDNet training images/s and eval FPS per size and precision, the SAM2
//! decoder forward and training step, the data loader's images/s, and (`--workloads replicas`)
//! the data-parallel path's overhead on one device, (`--workloads hiera`) the SAM 2.1 encoder
//! forward and fine-tuning steps at 1024², with peak memory.
//! Results go to [`SuiteReport`](crate::bench::results::SuiteReport).

use burn::backend::Autodiff;
use burn::tensor::backend::{AutodiffBackend, Backend};
use segburn_data::{DataConfig, DatasetIndex, Layout};
use segburn_models::pidnet::{PidNetConfig, PidNetSize};
use segburn_models::sam2::official_model::size_name;
use segburn_train::inference::InferenceConfig;
use segburn_train::loss::PidNetLossConfig;
use segburn_train::mixed_precision::Precision;
use segburn_train::pidnet::{PidNetSetup, PidNetTrainConfig};

pub use crate::bench::plan::{BenchDevice, SuiteArgs, SuitePlan};
use crate::bench::results::{current_commit, load_average, MachineInfo, SuiteReport, SuiteRow};
use crate::bench::workloads::{
    hiera_encoder_forward, hiera_finetune_step, pidnet_inference, pidnet_train_step_in,
    sam2_decoder_forward, sam2_train_step, trainer_step_timing, with_peak_rss, PeakSource, Timing,
};
use crate::device::{only, try_dispatch, BackendJob, DeviceConfig, Unavailable};

fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F32 => "f32",
        Precision::Bf16 => "bf16",
        Precision::F16 => "f16",
    }
}

/// Peak memory of one workload on this device.
type Peak = Option<(u64, PeakSource)>;

struct RowSpec<'a> {
    workload: &'a str,
    model: String,
    precision: &'a str,
    shape: String,
    unit: &'a str,
    items_per_run: f64,
}

fn row(spec: RowSpec, timing: &Timing, peak: Peak, peak_note_cuda: Option<&str>) -> SuiteRow {
    let (bytes, note) = match (peak_note_cuda, peak) {
        (Some(note), _) => (None, note.to_string()),
        (None, Some((b, PeakSource::ResetVmHwm))) => (Some(b), "RSS (VmHWM)".to_string()),
        (None, Some((b, PeakSource::ProcessVmHwm))) => {
            (Some(b), "RSS (process peak so far)".to_string())
        }
        (None, None) => (None, "(no /proc: not Linux)".to_string()),
    };
    SuiteRow {
        key: format!(
            "{}/{}/{}/{}",
            spec.workload, spec.model, spec.precision, spec.shape
        ),
        workload: spec.workload.into(),
        model: spec.model,
        precision: spec.precision.into(),
        shape: spec.shape,
        value: spec.items_per_run / (timing.median_ms / 1e3).max(1e-12),
        unit: spec.unit.into(),
        median_ms: timing.median_ms,
        min_ms: timing.min_ms,
        runs: timing.runs_ms.len(),
        peak_memory_bytes: bytes,
        peak_memory_note: note,
    }
}

/// Runs the plan's workloads on backend `B`; `cuda_memory_note` replaces the RSS figure on a
/// GPU (where the host's RSS says nothing about device memory).
fn run_on<B: AutodiffBackend>(
    plan: &SuitePlan,
    device: &B::Device,
    cuda_memory_note: Option<&str>,
) -> Result<Vec<SuiteRow>, String> {
    let mut rows = Vec::new();
    let [h, w] = plan.crop;
    let [eh, ew] = plan.eval_size;
    for &size in &plan.sizes {
        for &precision in &plan.precisions {
            let dtype = precision_name(precision);
            if plan.runs("train") {
                let (timing, peak) = with_peak_rss(|| {
                    pidnet_train_step_in::<B>(
                        size,
                        [plan.batch, h, w],
                        precision,
                        device,
                        plan.repeats,
                    )
                });
                let spec = RowSpec {
                    workload: "train",
                    model: format!("PIDNet-{size:?}"),
                    precision: dtype,
                    shape: format!("{}x3x{h}x{w}", plan.batch),
                    unit: "images/s",
                    items_per_run: plan.batch as f64,
                };
                rows.push(row(spec, &timing, peak, cuda_memory_note));
            }
            if plan.runs("eval") {
                // The other `bench eval` workload: end to end as `eval` runs it (network,
                // upsampling to full resolution, argmax, class map to the host).
                let config = InferenceConfig::whole(precision);
                let (timing, peak) = with_peak_rss(|| {
                    pidnet_inference::<B::InnerBackend>(
                        size,
                        [eh, ew],
                        &config,
                        device,
                        plan.repeats,
                    )
                });
                let timing = timing.map_err(|e| format!("eval benchmark: {e}"))?;
                let spec = RowSpec {
                    workload: "eval",
                    model: format!("PIDNet-{size:?}"),
                    precision: dtype,
                    shape: format!("1x3x{eh}x{ew}"),
                    unit: "FPS",
                    items_per_run: 1.0,
                };
                rows.push(row(spec, &timing, peak, cuda_memory_note));
            }
            if plan.runs("replicas") {
                rows.extend(replica_rows::<B>(
                    plan,
                    size,
                    precision,
                    device,
                    cuda_memory_note,
                )?);
            }
        }
    }
    if plan.runs("sam2") {
        let (timing, peak) =
            with_peak_rss(|| sam2_decoder_forward::<B::InnerBackend>(device, plan.repeats));
        let spec = RowSpec {
            workload: "sam2",
            model: "decoder-fwd".into(),
            precision: "f32",
            shape: "1x256x16x16".into(),
            unit: "calls/s",
            items_per_run: 1.0,
        };
        rows.push(row(spec, &timing, peak, cuda_memory_note));
        let n = if plan.smoke { 1 } else { 4 };
        let (timing, peak) = with_peak_rss(|| sam2_train_step::<B>(n, device, plan.repeats));
        let spec = RowSpec {
            workload: "sam2",
            model: "train-step".into(),
            precision: "f32",
            shape: format!("{n}x256x16x16"),
            unit: "steps/s",
            items_per_run: 1.0,
        };
        rows.push(row(spec, &timing, peak, cuda_memory_note));
    }
    if plan.runs("hiera") {
        rows.extend(hiera_rows::<B>(plan, device, cuda_memory_note)?);
    }
    if plan.runs("loader") {
        rows.push(loader_row(plan)?);
    }
    Ok(rows)
}

/// For each SAM 2.1 size: the encoder forward and the fine-tuning step with the encoder
/// frozen and trainable, batch 1, f32.
fn hiera_rows<B: AutodiffBackend>(
    plan: &SuitePlan,
    device: &B::Device,
    cuda_memory_note: Option<&str>,
) -> Result<Vec<SuiteRow>, String> {
    let side = plan.hiera_side;
    let mut rows = Vec::new();
    for &size in &plan.hiera_sizes {
        let model = format!("Hiera-{}", size_name(size).to_ascii_uppercase());
        let spec = |what: &str, unit: &'static str| RowSpec {
            workload: "hiera",
            model: format!("{model} {what}"),
            precision: "f32",
            shape: format!("1x3x{side}x{side}"),
            unit,
            items_per_run: 1.0,
        };
        let (timing, peak) = with_peak_rss(|| {
            hiera_encoder_forward::<B::InnerBackend>(size, side, device, plan.repeats)
        });
        let timing = timing.map_err(|e| format!("hiera benchmark: {e}"))?;
        rows.push(row(
            spec("encoder-fwd", "images/s"),
            &timing,
            peak,
            cuda_memory_note,
        ));
        for (frozen, what) in [(true, "finetune-frozen"), (false, "finetune-full")] {
            let (timing, peak) = with_peak_rss(|| {
                hiera_finetune_step::<B>(size, side, frozen, device, plan.repeats)
            });
            let timing = timing.map_err(|e| format!("hiera benchmark: {e}"))?;
            rows.push(row(spec(what, "steps/s"), &timing, peak, cuda_memory_note));
        }
    }
    Ok(rows)
}

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
fn replica_rows<B: AutodiffBackend>(
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

/// `(plain, replica path)` median step times of each `replicas` pair, as a sentence.
pub fn replica_overhead(report: &SuiteReport) -> Vec<String> {
    let rows: Vec<&SuiteRow> = report
        .rows
        .iter()
        .filter(|r| r.workload == "replicas")
        .collect();
    rows.chunks(2)
        .filter_map(|pair| match pair {
            [plain, replicated] => Some(format!(
                "data-parallel path on one device, {} {}: {:+.1} % per step ({:.1} ms vs {:.1} ms plain)",
                plain.model,
                plain.precision,
                (replicated.median_ms / plain.median_ms - 1.0) * 100.0,
                replicated.median_ms,
                plain.median_ms
            )),
            _ => None,
        })
        .collect()
}

/// The threaded loader over the training split of `plan.loader_data` with the plan's crop
/// and batch, one worker per core (host memory: always RSS).
fn loader_row(plan: &SuitePlan) -> Result<SuiteRow, String> {
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

/// The suite on the dispatcher's backend; on CUDA a panic becomes an error and a note stands
/// in for the RSS figure.
struct Suite<'a> {
    plan: &'a SuitePlan,
    on_cuda: bool,
}

impl BackendJob<Vec<SuiteRow>> for Suite<'_> {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<Vec<SuiteRow>> {
        let device = only(devices);
        let rows = if self.on_cuda {
            let note = "n/a on CUDA (sample nvidia-smi: scripts/gpu_check.sh)";
            crate::doctor::guard::guarded(|| run_on::<Autodiff<B>>(self.plan, &device, Some(note)))
                .map_err(|panic| format!("the CUDA run panicked: {panic}"))
                .and_then(|rows| rows)
        } else {
            run_on::<Autodiff<B>>(self.plan, &device, None)
        };
        rows.map_err(anyhow::Error::msg)
    }
}

/// The plan's rows on its device.
fn suite_rows(plan: &SuitePlan) -> Result<Vec<SuiteRow>, String> {
    let (device, on_cuda) = match plan.device {
        BenchDevice::Cpu => (DeviceConfig::Cpu, false),
        BenchDevice::Cuda(index) => (DeviceConfig::cuda(index), true),
    };
    try_dispatch(&device, Suite { plan, on_cuda })
        .map_err(unavailable_message)?
        .map_err(|error| error.to_string())
}

/// `bench`'s own words for a CUDA that cannot be used: they name `--device`, not an experiment.
fn unavailable_message(why: Unavailable) -> String {
    match why {
        Unavailable::NotBuilt => "--device cuda: this build has no CUDA support; rebuild with \
            `CUDARC_CUDA_VERSION=13000 cargo build --release --features cuda`, or use --device cpu"
            .into(),
        Unavailable::Unusable { .. } => "CUDA cannot load on this machine: run `doctor` to see \
            what is missing, or use --device cpu"
            .into(),
        Unavailable::Missing { index, available } => format!(
            "--device cuda:{index}: this machine has {available} CUDA device(s) (indices \
             0..{available})"
        ),
    }
}

/// Runs the plan and describes where it ran.
pub fn run_suite(plan: &SuitePlan) -> Result<SuiteReport, String> {
    let load_average_before = load_average();
    let rows = suite_rows(plan)?;
    let device = match plan.device {
        BenchDevice::Cpu => "cpu (Flex)".to_string(),
        BenchDevice::Cuda(index) => format!("cuda:{index}"),
    };
    let system = crate::doctor::system::system_info();
    Ok(SuiteReport {
        segburn_version: env!("CARGO_PKG_VERSION").into(),
        commit: current_commit(),
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        device,
        smoke: plan.smoke,
        machine: MachineInfo {
            os: system.os,
            cpu_threads: system.cpu_threads,
            load_average_before,
            load_average_after: load_average(),
        },
        rows,
    })
}

/// The `bench` binary's suite: run, print the table, write `json`, print the comparison.
pub fn run_command(
    args: &SuiteArgs,
    smoke: bool,
    json: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let plan = SuitePlan::from_args(args, smoke).map_err(anyhow::Error::msg)?;
    // Read the old file first: a typo should not cost a whole run.
    let old = args
        .compare
        .as_deref()
        .map(SuiteReport::read)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let report = run_suite(&plan).map_err(anyhow::Error::msg)?;
    println!("{}", report.table());
    for line in replica_overhead(&report) {
        println!("{line}");
    }
    if let Some(path) = json {
        let text = report.to_json()?;
        std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        println!("results written to {}", path.display());
    }
    if let Some(old) = &old {
        println!("{}", report.comparison(old));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::parse_suite_args as args;

    #[test]
    fn the_smoke_suite_runs_every_workload_on_the_cpu() {
        let mut suite = args(&["--precision", "f32,bf16"]);
        suite.loader_data =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
        let plan = SuitePlan::from_args(&suite, true).unwrap();
        let report = run_suite(&plan).unwrap();
        let keys: Vec<&str> = report.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(report.rows.len(), 7, "{keys:?}");
        assert!(keys.contains(&"train/PIDNet-S/bf16/1x3x64x64"));
        assert!(keys.contains(&"eval/PIDNet-S/f32/1x3x64x128"));
        assert!(report
            .rows
            .iter()
            .all(|r| r.value > 0.0 && r.value.is_finite()));
        assert!(report.table().contains("SMOKE"));
        let compared = report.comparison(&report);
        assert!(compared.contains("1.00x"));
    }

    #[test]
    fn the_replica_workload_times_both_paths() {
        let mut suite = args(&["--workloads", "replicas"]);
        suite.loader_data =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
        let plan = SuitePlan::from_args(&suite, true).unwrap();
        let report = run_suite(&plan).unwrap();
        let keys: Vec<&str> = report.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "replicas/PIDNet-S/f32/plain/1x3x64x64",
                "replicas/PIDNet-S/f32/dp/1x3x64x64"
            ]
        );
        assert!(report.rows.iter().all(|r| r.value > 0.0 && r.runs == 1));
        let overhead = replica_overhead(&report);
        assert_eq!(overhead.len(), 1);
        assert!(overhead[0].contains("% per step"), "{overhead:?}");
    }
}

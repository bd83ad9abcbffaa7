//! The benchmark suite behind `bench [--device cpu|cuda:N] [--sizes s,m,l]
//! [--precision f32,bf16,f16] [--crop H,W] [--batch N] [--smoke] [--json FILE]
//! [--compare FILE]`: PIDNet training images/s and eval FPS per size and precision, the SAM2
//! decoder forward and training step, the data loader's images/s, and (`--workloads replicas`)
//! the data-parallel path's overhead on one device, (`--workloads hiera`) the SAM 2.1 encoder
//! forward and fine-tuning steps at 1024², with peak memory, (`--workloads sam2-real`) the SAM 2.1
//! decoder on a 64×64 embedding and one "segment everything" pass at 1024².
//! Results go to [`SuiteReport`](crate::bench::results::SuiteReport).
//!
//! This file dispatches the suite to its device and reports it; `backend_rows.rs` measures the
//! workloads on the backend, `data_rows.rs` those that read a dataset (trainer steps, loader),
//! `sam2_real_rows.rs` the real-size SAM 2.1 rows, and `row_spec.rs` turns one measurement into
//! a row.

mod backend_rows;
mod data_rows;
mod row_spec;
mod sam2_real_rows;

use burn::backend::Autodiff;
use burn::tensor::backend::Backend;

pub use crate::bench::plan::{BenchDevice, SuiteArgs, SuitePlan};
use crate::bench::results::{current_commit, load_average, MachineInfo, SuiteReport, SuiteRow};
use crate::device::{only, try_dispatch, BackendJob, DeviceConfig, DeviceIds, Unavailable};
use backend_rows::run_on;

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

/// The suite on the dispatcher's backend; on a GPU a panic becomes an error and a note stands
/// in for the RSS figure.
struct Suite<'a> {
    plan: &'a SuitePlan,
    on_gpu: bool,
}

impl BackendJob<Vec<SuiteRow>> for Suite<'_> {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<Vec<SuiteRow>> {
        let device = only(devices);
        let rows = if self.on_gpu {
            let note = "n/a on a GPU (sample nvidia-smi: scripts/gpu_check.sh)";
            crate::device::guard::guarded(|| run_on::<Autodiff<B>>(self.plan, &device, Some(note)))
                .map_err(|panic| format!("the GPU run panicked: {panic}"))
                .and_then(|rows| rows)
        } else {
            run_on::<Autodiff<B>>(self.plan, &device, None)
        };
        rows.map_err(anyhow::Error::msg)
    }
}

/// The plan's rows on its device.
fn suite_rows(plan: &SuitePlan) -> Result<Vec<SuiteRow>, String> {
    let (device, on_gpu) = match plan.device {
        BenchDevice::Cpu => (DeviceConfig::Cpu, false),
        BenchDevice::Cuda(index) => (DeviceConfig::cuda(index), true),
        BenchDevice::Wgpu(index) => (DeviceConfig::Wgpu(DeviceIds::One(index)), true),
    };
    try_dispatch(&device, Suite { plan, on_gpu })
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
        Unavailable::WgpuNotBuilt => "--device wgpu: this build has no wgpu support; rebuild \
            with `cargo build --release --features wgpu`, or use --device cpu"
            .into(),
        other => format!("--device wgpu: {}", other.message("use --device cpu")),
    }
}

/// Runs the plan and describes where it ran.
pub fn run_suite(plan: &SuitePlan) -> Result<SuiteReport, String> {
    let load_average_before = load_average();
    let rows = suite_rows(plan)?;
    let device = match plan.device {
        BenchDevice::Cpu => "cpu (Flex)".to_string(),
        BenchDevice::Cuda(index) => format!("cuda:{index}"),
        BenchDevice::Wgpu(index) => format!("wgpu:{index}"),
    };
    let system = crate::device::system::system_info();
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
    fn the_sam2_real_workload_gives_its_four_rows() {
        let suite = args(&["--workloads", "sam2-real"]);
        let report = run_suite(&SuitePlan::from_args(&suite, true).unwrap()).unwrap();
        let keys: Vec<&str> = report.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "sam2-real/decoder+prompts x1/f32/1x256x4x4",
                "sam2-real/decoder+prompts x64/f32/64x256x4x4",
                "sam2-real/everything Hiera-T/f32/1x3x64x64",
                "sam2-real/everything Hiera-T kept/f32/1x3x64x64"
            ]
        );
        // 4×4 clicks × 3 masks at the smoke size.
        let candidates = &report.rows[2];
        assert!((candidates.value * candidates.median_ms / 1e3 - 48.0).abs() < 1e-6);
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

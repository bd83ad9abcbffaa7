//! `doctor`: what this machine can run, in the order a user should fix things — the system,
//! the compiled backends and whether CUDA loads, a kernel sanity check per device against a
//! plain-Rust CPU reference, half-precision support, and the checkpoint / dataset folders
//! (writable, save speed, long and non-ASCII paths).
//!
//! Every check is a function returning a structured result; [`diagnose`] turns them into
//! [`Check`] lines and [`render`] prints them. A [`Status::Fail`] (something the run needs is
//! broken) makes the exit code non-zero; CUDA being absent on a CPU machine is only
//! [`Status::Info`].

pub mod backends;
pub mod devices;
pub mod fixtures;
pub mod kernels;
pub mod paths;
pub mod precision;
pub mod reference;
pub mod render;
pub mod storage;
pub mod wgpu_adapters;
pub mod wide_conv;

use std::path::PathBuf;

use segburn_data::Layout;
use segburn_kernels::{vector_instructions, VectorInstructions};
use segburn_train::compute_threads::{ComputeThreads, THREADS_VARIABLE};
use segburn_train::mixed_precision::Precision;
use serde::Serialize;

use crate::device::{cuda_probe, system, wgpu_probe};
use crate::experiment::ExperimentFile;
use crate::experiment::{DeviceConfig, PidNetExperiment};

/// The CUDA indices a device configuration trains on (empty for the CPU and wgpu).
pub fn cuda_indices(device: &DeviceConfig) -> Vec<usize> {
    device_indices(device, "Cuda")
}

/// The indices of `variant` (`"Cuda"`, `"Wgpu"`) a device configuration trains on. Read through
/// serde (`"Cpu"`, `{"Cuda": 0}`, `{"Wgpu": [0, 1]}`) so that it does not depend on how the
/// variants are spelled in Rust.
pub fn device_indices(device: &DeviceConfig, variant: &str) -> Vec<usize> {
    let value = serde_json::to_value(device).unwrap_or_default();
    match value.get(variant) {
        Some(serde_json::Value::Number(n)) => {
            n.as_u64().map(|i| vec![i as usize]).unwrap_or_default()
        }
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .filter_map(|v| v.as_u64())
            .map(|i| i as usize)
            .collect(),
        _ => Vec::new(),
    }
}

pub use render::render;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Status {
    Ok,
    /// Worth knowing, nothing to fix (e.g. no CUDA on a CPU machine).
    Info,
    /// Works, but something will hurt (slow saves, no half precision).
    Warn,
    /// Something the run needs is broken: the exit code is non-zero.
    Fail,
}

/// Where a check belongs; sections print in this order (the order to fix things in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Section {
    System,
    Backends,
    Kernels,
    Storage,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub section: Section,
    pub name: String,
    pub status: Status,
    pub detail: String,
    /// What to do about it (install, set, run).
    pub hint: Option<String>,
}

impl Check {
    pub fn new(
        section: Section,
        name: impl Into<String>,
        status: Status,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            section,
            name: name.into(),
            status,
            detail: detail.into(),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// Everything `doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// 1 when anything needed is broken, else 0.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.count(Status::Fail) > 0)
    }

    pub fn find(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// What to examine.
#[derive(Debug, Clone, Default)]
pub struct DoctorOptions {
    /// An experiment file: its run directory, dataset, device and precision are checked.
    pub experiment: Option<PathBuf>,
    /// `--set key=value` overrides for the experiment.
    pub overrides: Vec<String>,
    /// Skip the kernel and precision checks (they take a few seconds per device).
    pub skip_kernels: bool,
    /// The shared fixtures folder: also run PIDNet-S and SAM2 on each device against the
    /// official outputs.
    pub fixtures: Option<PathBuf>,
}

/// What the checks are about: from the experiment, or the defaults.
#[derive(Debug, Clone)]
pub struct Targets {
    pub checkpoint_dir: PathBuf,
    pub dataset_dir: PathBuf,
    /// CUDA indices the run needs (empty: the CPU).
    pub cuda_devices: Vec<usize>,
    /// wgpu adapter indices the run needs.
    pub wgpu_devices: Vec<usize>,
    pub precision: Precision,
    /// An experiment names these folders and this device: their absence is a failure.
    pub from_experiment: bool,
}

impl Default for Targets {
    fn default() -> Self {
        Self {
            checkpoint_dir: PathBuf::from("checkpoints"),
            dataset_dir: PathBuf::from("datasets"),
            cuda_devices: Vec::new(),
            wgpu_devices: Vec::new(),
            precision: Precision::F32,
            from_experiment: false,
        }
    }
}

impl Targets {
    pub fn from_experiment(experiment: &PidNetExperiment) -> Self {
        let dataset_dir = match &experiment.data.layout {
            Layout::Cityscapes { root }
            | Layout::CamVid { root, .. }
            | Layout::Ade20k { root }
            | Layout::PascalVoc { root }
            | Layout::ListFile { root, .. } => root.clone(),
            Layout::FolderPair { images, .. } => images.clone(),
        };
        Self {
            checkpoint_dir: experiment.train.run_dir.clone(),
            dataset_dir,
            cuda_devices: cuda_indices(&experiment.device),
            wgpu_devices: device_indices(&experiment.device, "Wgpu"),
            precision: experiment.train.precision,
            from_experiment: true,
        }
    }
}

/// Runs every check. Never panics on a user-caused condition: each problem is a line.
pub fn diagnose(options: &DoctorOptions) -> Report {
    let mut checks = Vec::new();
    let targets = match &options.experiment {
        None => Targets::default(),
        Some(path) => match PidNetExperiment::load(path, &options.overrides) {
            Ok(experiment) => {
                checks.push(Check::new(
                    Section::System,
                    "experiment",
                    Status::Ok,
                    path.display().to_string(),
                ));
                Targets::from_experiment(&experiment)
            }
            Err(error) => {
                checks.push(
                    Check::new(
                        Section::System,
                        "experiment",
                        Status::Fail,
                        error.to_string(),
                    )
                    .hint("the checks below use the default folders checkpoints/ and datasets/"),
                );
                Targets::default()
            }
        },
    };
    checks.extend(system_checks());
    let probe = cuda_probe::probe_cuda();
    checks.extend(backends::checks(&probe, &targets.cuda_devices));
    let adapters = wgpu_probe::probe_wgpu();
    checks.extend(wgpu_adapters::checks(&adapters, &targets.wgpu_devices));
    if !options.skip_kernels {
        checks.extend(devices::checks(
            &backends::cuda_devices_to_test(&probe),
            &adapters,
            targets.precision,
            options.fixtures.as_deref(),
        ));
    }
    checks.extend(storage_and_path_checks(&targets));
    checks.sort_by_key(|c| c.section);
    Report { checks }
}

fn system_checks() -> Vec<Check> {
    let info = system::system_info();
    let mut checks = vec![
        Check::new(Section::System, "OS", Status::Ok, info.os),
        Check::new(
            Section::System,
            "CPU threads",
            Status::Ok,
            info.cpu_threads.to_string(),
        ),
        compute_threads_check(ComputeThreads::current()),
        vector_instructions_check(vector_instructions()),
    ];
    checks.push(match info.memory {
        Some(memory) => {
            let detail = format!(
                "{} total, {} available",
                system::gib(memory.total_bytes),
                system::gib(memory.available_bytes)
            );
            // PIDNet-S training at the official 12×1024×1024 needs ~10 GB on the CPU.
            if memory.available_bytes < 4 << 30 {
                Check::new(Section::System, "memory", Status::Warn, detail)
                    .hint("under 4 GiB free: use a smaller batch or crop (--set data.train_loader.batch_size=2)")
            } else {
                Check::new(Section::System, "memory", Status::Ok, detail)
            }
        }
        None => Check::new(Section::System, "memory", Status::Info, "unknown (read from /proc/meminfo on Linux only)"),
    });
    checks
}

/// The pool Flex computes on: its size is the run's CPU thread budget.
fn compute_threads_check(threads: ComputeThreads) -> Check {
    let check = |status| {
        Check::new(
            Section::System,
            "compute threads",
            status,
            threads.to_string(),
        )
    };
    if threads.oversubscribed() {
        check(Status::Warn).hint(format!(
            "more compute threads than cores makes every step slower: unset {THREADS_VARIABLE} or set it to {}",
            threads.cores
        ))
    } else {
        check(Status::Ok)
    }
}

/// The vector instructions the CPU's matrix products run with.
fn vector_instructions_check(instructions: VectorInstructions) -> Check {
    let name = "CPU vector instructions";
    match instructions {
        VectorInstructions::Baseline => Check::new(Section::System, name, Status::Warn, instructions.to_string())
            .hint("matrix products fall back to SSE or scalar kernels: training on this CPU runs several times slower than on one with AVX2 + FMA"),
        _ => Check::new(Section::System, name, Status::Ok, instructions.to_string()),
    }
}

fn storage_and_path_checks(targets: &Targets) -> Vec<Check> {
    let mut checks = storage::checks(
        &targets.checkpoint_dir,
        &targets.dataset_dir,
        targets.from_experiment,
    );
    let checkpoint = storage::check_folder(&targets.checkpoint_dir);
    let base = if checkpoint.exists {
        Some(checkpoint.path.clone())
    } else {
        checkpoint.create_in.clone()
    };
    if let (Some(base), true) = (base, checkpoint.writable.is_ok()) {
        checks.extend(paths::checks(&base, &checkpoint.path));
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_experiment_file_is_one_failing_line() {
        let report = diagnose(&DoctorOptions {
            experiment: Some(PathBuf::from("/nonexistent/experiment.ron")),
            skip_kernels: true,
            ..Default::default()
        });
        let line = report.find("experiment").unwrap();
        assert_eq!(line.status, Status::Fail);
        assert!(line.detail.contains("/nonexistent/experiment.ron"));
        assert_eq!(report.exit_code(), 1);
        assert!(report.find("OS").is_some());
    }

    #[test]
    fn cuda_indices_of_a_device_configuration() {
        let parse = |text: &str| ron::de::from_str::<DeviceConfig>(text).unwrap();
        assert!(cuda_indices(&parse("Cpu")).is_empty());
        assert_eq!(cuda_indices(&parse("Cuda(2)")), vec![2]);
    }

    #[test]
    fn the_compute_pool_is_reported_and_oversubscription_warned() {
        let report = diagnose(&DoctorOptions {
            skip_kernels: true,
            ..Default::default()
        });
        let line = report.find("compute threads").unwrap();
        assert_eq!(line.detail, ComputeThreads::current().to_string());
        let crowded = compute_threads_check(ComputeThreads {
            pool: 8,
            cores: 2,
            from_env: true,
        });
        assert_eq!(crowded.status, Status::Warn);
        assert!(crowded.hint.unwrap().contains("RAYON_NUM_THREADS"));
    }

    #[test]
    fn the_vector_instructions_are_reported_and_a_cpu_without_them_warned() {
        let report = diagnose(&DoctorOptions {
            skip_kernels: true,
            ..Default::default()
        });
        let line = report.find("CPU vector instructions").unwrap();
        assert_eq!(line.detail, vector_instructions().to_string());
        let old = vector_instructions_check(VectorInstructions::Baseline);
        assert_eq!(old.status, Status::Warn);
        assert!(old.hint.unwrap().contains("AVX2 + FMA"));
        assert_eq!(
            vector_instructions_check(VectorInstructions::Avx512).status,
            Status::Ok
        );
    }

    #[test]
    fn sections_come_in_fix_order() {
        let report = diagnose(&DoctorOptions {
            skip_kernels: true,
            ..Default::default()
        });
        let sections: Vec<Section> = report.checks.iter().map(|c| c.section).collect();
        let mut sorted = sections.clone();
        sorted.sort();
        assert_eq!(sections, sorted);
        assert_eq!(report.checks[0].name, "OS");
    }
}

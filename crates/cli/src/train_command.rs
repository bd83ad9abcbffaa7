//! `train CONFIG [--resume [FILE]] [--init-from FILE] [--set key=value]… [--print-config]
//! [--check-data] [--quiet]`.

use std::path::PathBuf;

use anyhow::{anyhow, bail};
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use segburn_data::scan_split;
use segburn_train::engine::TrainError;
use segburn_train::pidnet::{resolve_class_weights, PidNetTrainer};

use crate::experiment::{DeviceConfig, Experiment};
use crate::interrupt::{stop_on_interrupt, Outcome};
use crate::training::{train, TrainingCommand};

/// Parsed `train` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "train",
    about = "Train a segmentation model from an experiment file (RON)"
)]
pub struct TrainArgs {
    /// The experiment file, e.g. configs/quickstart.ron.
    pub config: PathBuf,
    /// Continue the run: from its newest checkpoint, or from PATH (a checkpoint, a run
    /// directory, or a run's checkpoints/latest or checkpoints/best).
    #[arg(long, num_args = 0..=1, value_name = "PATH")]
    pub resume: Option<Option<PathBuf>>,
    /// Start from these weights only (an official .pt/.pth.tar/.safetensors, or a checkpoint:
    /// a file, a run directory, or a run's checkpoints/latest or checkpoints/best).
    #[arg(long, value_name = "PATH", conflicts_with = "resume")]
    pub init_from: Option<PathBuf>,
    /// Override a field: --set train.lr=0.005 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the fully resolved experiment and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Scan the training and validation splits, report every problem, and exit.
    #[arg(long)]
    pub check_data: bool,
    /// Plain log lines instead of progress bars (for CI logs).
    #[arg(long)]
    pub quiet: bool,
}

const DATA_HELP: &str = "see datasets/README.md for the supported layouts; to try segburn without \
downloading anything, train on the bundled sample: cargo run --release --bin train -- configs/quickstart.ron";

/// Runs `train`; [`Outcome::exit_code`] is the process's exit status.
pub fn run(args: &TrainArgs) -> anyhow::Result<Outcome> {
    let experiment = Experiment::load(&args.config, &args.set)?;
    if args.print_config {
        println!("{}", experiment.to_ron());
        return Ok(Outcome::Finished);
    }
    if args.check_data {
        return check_data(&experiment).map(|()| Outcome::Finished);
    }
    match &experiment.device {
        DeviceConfig::Cpu => {
            train_on::<Autodiff<Flex>>(&experiment, vec![Default::default()], args)
        }
        DeviceConfig::CpuReplicas(n) => {
            train_on::<Autodiff<Flex>>(&experiment, vec![Default::default(); *n], args)
        }
        DeviceConfig::Cuda(ids) => train_on_cuda(&experiment, &ids.to_vec(), args),
    }
}

#[cfg(feature = "cuda")]
fn train_on_cuda(
    experiment: &Experiment,
    ids: &[usize],
    args: &TrainArgs,
) -> anyhow::Result<Outcome> {
    use burn::backend::cuda::CudaDevice;
    use burn::backend::Cuda;
    // Check before Burn touches CUDA: a missing driver or NVRTC panics deep inside cubecl.
    let probe = crate::doctor::cuda_probe::probe_cuda();
    if !probe.usable() {
        let reason = match (
            &probe.driver_library.loaded,
            &probe.nvrtc_library.loaded,
            &probe.devices,
        ) {
            (None, _, _) => "the CUDA driver library (libcuda) does not load".to_string(),
            (_, None, _) => "NVRTC (libnvrtc, part of the CUDA toolkit) does not load".to_string(),
            (_, _, Err(e)) => format!("the driver lists no device ({e})"),
            _ => "the driver lists no device".to_string(),
        };
        bail!("device Cuda{ids:?} was asked for, but CUDA is not usable here: {reason}. Run `doctor` for details, or train on the CPU with --set device=Cpu");
    }
    let available = probe.devices.as_ref().map_or(0, |d| d.len());
    if let Some(missing) = ids.iter().find(|&&i| i >= available) {
        bail!("device Cuda({missing}) was asked for, but this machine has {available} CUDA device(s) (indices 0..{available})");
    }
    let devices = ids.iter().map(|&i| CudaDevice::new(i)).collect();
    train_on::<Autodiff<Cuda>>(experiment, devices, args)
}

#[cfg(not(feature = "cuda"))]
fn train_on_cuda(_: &Experiment, _: &[usize], _: &TrainArgs) -> anyhow::Result<Outcome> {
    bail!(
        "the experiment asks for device Cuda, but this build has no CUDA support; rebuild with \
         `cargo build --release --features cuda`, or train on the CPU with --set device=Cpu"
    )
}

fn check_data(experiment: &Experiment) -> anyhow::Result<()> {
    let data = &experiment.data;
    let mut problems = 0;
    for split in [&data.train_split, &data.val_split] {
        let report = scan_split(data, split).map_err(|e| anyhow!("{e}\n{DATA_HELP}"))?;
        println!("{report}");
        problems += report.problems.len();
    }
    if problems > 0 {
        bail!("{problems} problem(s) found in the data");
    }
    Ok(())
}

fn explain(error: TrainError) -> anyhow::Error {
    match error {
        TrainError::Data(e) => anyhow!("{e}\n{DATA_HELP}"),
        other => anyhow!(other),
    }
}

fn train_on<B: AutodiffBackend>(
    experiment: &Experiment,
    devices: Vec<B::Device>,
    args: &TrainArgs,
) -> anyhow::Result<Outcome> {
    // Class weights from the data are computed here, once, so that the experiment recorded in
    // the run's checkpoints carries the numbers the run trains with.
    let mut experiment = experiment.clone();
    if experiment.loss.class_weights.needs_data() {
        resolve_class_weights(&mut experiment.loss, &experiment.data).map_err(explain)?;
        if let Some(weights) = experiment.loss.class_weights.values() {
            println!("class weights from the training split: {weights:?}");
        }
    }
    // From here on, a Ctrl-C stops at the next step boundary (or before the first step).
    let stop = stop_on_interrupt()?;
    let trainer = PidNetTrainer::<B>::with_devices(experiment.setup(), devices)
        .map_err(explain)?
        .replicate_single_device(experiment.device.replicated())
        .with_stop_signal(stop);
    let command = TrainingCommand {
        binary: "train",
        config: &args.config,
        overrides: &args.set,
        resume: args.resume.as_ref().map(Option::as_deref),
        init_from: args.init_from.as_deref(),
        quiet: args.quiet,
        curves_in: Some(&experiment.train.run_dir),
    };
    train(trainer, &experiment, &command, explain)
}

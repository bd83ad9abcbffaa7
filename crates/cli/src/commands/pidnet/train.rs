//! `train CONFIG [--resume [FILE]] [--init-from FILE] [--set key=value]… [--print-config]
//! [--check-data] [--quiet]`.

use anyhow::{anyhow, bail};
use burn::backend::Autodiff;
use burn::tensor::backend::{AutodiffBackend, Backend};
use segburn_data::scan_split;
use segburn_train::engine::TrainError;
use segburn_train::pidnet::{resolve_class_weights, PidNetTrainer};

use crate::commands::interrupt::{stop_on_interrupt, Outcome};
use crate::commands::training::{train, TrainingArgs, TrainingCommand};
use crate::device::{dispatch, BackendJob};
use crate::experiment::ExperimentFile;
use crate::experiment::PidNetExperiment;

/// Parsed `train` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "train",
    about = "Train PIDNet semantic segmentation from an experiment file (RON) on segburn's training engine (accumulation, data-parallel replicas, mixed precision, exact resume)"
)]
pub struct TrainArgs {
    #[command(flatten)]
    pub run: TrainingArgs,
    /// Scan the training and validation splits, report every problem, and exit.
    #[arg(long)]
    pub check_data: bool,
}

const DATA_HELP: &str = "see datasets/README.md for the supported layouts; to try segburn without \
downloading anything, train on the bundled sample: cargo run --release --bin train -- configs/quickstart.ron";

/// Runs `train`; [`Outcome::exit_code`] is the process's exit status.
pub fn run(args: &TrainArgs) -> anyhow::Result<Outcome> {
    let experiment = PidNetExperiment::load(&args.run.config, &args.run.set)?;
    if args.run.print_config {
        println!("{}", experiment.to_ron());
        return Ok(Outcome::Finished);
    }
    if args.check_data {
        return check_data(&experiment).map(|()| Outcome::Finished);
    }
    dispatch(
        &experiment.device,
        "train on the CPU with --set device=Cpu",
        (&experiment, args),
    )
}

/// `train` on the dispatcher's backend, with autodiff: (experiment, arguments).
impl BackendJob<Outcome> for (&PidNetExperiment, &TrainArgs) {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<Outcome> {
        train_on::<Autodiff<B>>(self.0, devices, self.1)
    }
}

fn check_data(experiment: &PidNetExperiment) -> anyhow::Result<()> {
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
    experiment: &PidNetExperiment,
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
        args: &args.run,
        curves_in: Some(&experiment.train.run_dir),
    };
    train(trainer, &experiment, &command, explain)
}

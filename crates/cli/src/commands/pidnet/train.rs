//! `train CONFIG [--resume [FILE]] [--init-from FILE] [--set key=value]… [--print-config]
//! [--check-data] [--quiet]`.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use burn::backend::Autodiff;
use burn::tensor::backend::{AutodiffBackend, Backend};
use segburn_data::validate;
use segburn_train::checkpoint::resolve_checkpoint;
use segburn_train::trainer::{resolve_class_weights, TrainError, Trainer, TrainerSetup};

use crate::commands::interrupt::{resume_command, stop_on_interrupt, stopped_report, Outcome};
use crate::device::{dispatch, BackendJob};
use crate::experiment::resume_check::{accept_differences, choose_checkpoint, compare};
use crate::experiment::Experiment;
use crate::output::progress::ProgressObserver;

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
    dispatch(
        &experiment.device,
        "train on the CPU with --set device=Cpu",
        (&experiment, args),
    )
}

/// `train` on the dispatcher's backend, with autodiff: (experiment, arguments).
impl BackendJob<Outcome> for (&Experiment, &TrainArgs) {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<Outcome> {
        train_on::<Autodiff<B>>(self.0, devices, self.1)
    }
}

fn check_data(experiment: &Experiment) -> anyhow::Result<()> {
    let data = &experiment.data;
    let mut problems = 0;
    for split in [&data.train_split, &data.val_split] {
        let report = validate(data, split).map_err(|e| anyhow!("{e}\n{DATA_HELP}"))?;
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
    let experiment = &experiment;
    let setup = TrainerSetup {
        model: experiment.model.pidnet(),
        data: experiment.data.clone(),
        loss: experiment.loss.clone(),
        train: experiment.train.clone(),
        experiment_text: experiment.to_ron(),
    };
    // From here on, a Ctrl-C stops at the next step boundary (or before the first step).
    let stop = stop_on_interrupt()?;
    let mut trainer = Trainer::<B>::with_devices(setup, devices)
        .map_err(explain)?
        .replicate_single_device(experiment.device.replicated())
        .with_stop_signal(stop);
    if let Some(resume) = &args.resume {
        let checkpoint = choose_checkpoint(trainer.checkpoint_dir(), resume.as_deref())?;
        let path = checkpoint.path.clone();
        let saved: Experiment = ron::de::from_str(&checkpoint.meta.config).with_context(|| {
            format!("{}: the embedded experiment is unreadable", path.display())
        })?;
        let (breaking, harmless) = compare(&saved, experiment);
        accept_differences(&path, &breaking, &harmless)?;
        trainer.resume_from(checkpoint).map_err(explain)?;
    } else if let Some(path) = &args.init_from {
        let path = resolve_checkpoint(path)?;
        let report = trainer.init_weights_from(&path).map_err(explain)?;
        println!("initialised from {}:\n{report}", path.display());
    }
    let total = trainer.total_steps();
    let stop = experiment.train.max_steps.map_or(total, |m| m.min(total));
    let mut observer = ProgressObserver::new(
        args.quiet,
        stop,
        trainer.state().step,
        experiment.train.log_every_steps,
    )
    .with_curves(&experiment.train.run_dir);
    let result = trainer.run(&mut observer);
    observer.finish();
    let summary = result.map_err(explain)?;
    if summary.stopped {
        let resume = resume_command("train", &args.config, &args.set);
        let checkpoint = summary.last_checkpoint.as_deref();
        println!("{}", stopped_report(summary.steps, checkpoint, &resume));
        return Ok(Outcome::Stopped);
    }
    println!(
        "finished at step {} in {:.1} s{}{}",
        summary.steps,
        summary.seconds,
        summary
            .final_report
            .as_ref()
            .map(|r| format!(
                "; validation mIoU {:.4} (all-classes mean {:.4})",
                r.mean_iou, r.mean_iou_all_classes
            ))
            .unwrap_or_default(),
        summary
            .last_checkpoint
            .as_ref()
            .map(|p| format!("; checkpoint {}", p.display()))
            .unwrap_or_default()
    );
    Ok(Outcome::Finished)
}

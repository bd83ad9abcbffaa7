//! What `train` and `train-sam2` share once their experiment is loaded and the engine built:
//! `--resume` (the checkpoint chosen, the experiment's changes checked by the engine's rules)
//! or `--init-from`, the progress display, the run, and the closing report (with the command
//! that continues a stopped run).

use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::tensor::backend::AutodiffBackend;
use segburn_train::checkpoint::resolve_checkpoint;
use segburn_train::engine::{Engine, Task, TrainError, ValidationReport};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::commands::interrupt::{resume_command, stopped_report, Outcome};
use crate::experiment::resume_check::{accept_differences, choose_checkpoint};
use crate::output::progress::ProgressObserver;

/// The arguments every training command takes (`train`, `train-sam2`).
#[derive(Debug, Clone, clap::Args)]
pub struct TrainingArgs {
    /// The experiment file, e.g. configs/quickstart.ron or configs/sam2_decoder.ron.
    pub config: PathBuf,
    /// Continue the run: from its newest checkpoint, or from PATH (a checkpoint, a run
    /// directory, or a run's checkpoints/latest or checkpoints/best).
    #[arg(long, num_args = 0..=1, value_name = "PATH")]
    pub resume: Option<Option<PathBuf>>,
    /// Start from these weights only: an official checkpoint (PIDNet .pt/.pth.tar/.safetensors;
    /// SAM2/SAM2.1 .pt/.safetensors, with a Hiera encoder the whole image model, loaded
    /// strictly, otherwise the heads) or a segburn checkpoint (a file, a run directory, or a
    /// run's checkpoints/latest or checkpoints/best).
    #[arg(long, value_name = "PATH", conflicts_with = "resume")]
    pub init_from: Option<PathBuf>,
    /// Override a field: --set train.lr=0.005 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the fully resolved experiment and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Plain log lines instead of progress bars (for CI logs).
    #[arg(long)]
    pub quiet: bool,
}

/// How a training command runs the shared part.
pub struct TrainingCommand<'a> {
    /// `train` or `train-sam2` (for the command that continues a stopped run).
    pub binary: &'static str,
    pub args: &'a TrainingArgs,
    /// Redraw `curves.png` in this run directory at each validation.
    pub curves_in: Option<&'a Path>,
}

/// Resumes or initialises `engine` as the command asks, trains it to the end (or to a stop
/// request), and prints how the run ended. `experiment` is the run's resolved experiment; the
/// checkpoint's own is read back as the same type to compare them.
pub fn train<B, T, E>(
    mut engine: Engine<B, T>,
    experiment: &E,
    command: &TrainingCommand<'_>,
    explain: impl Fn(TrainError) -> anyhow::Error,
) -> anyhow::Result<Outcome>
where
    B: AutodiffBackend,
    T: Task<B>,
    E: Serialize + DeserializeOwned,
{
    let args = command.args;
    if let Some(resume) = &args.resume {
        let checkpoint = choose_checkpoint(engine.checkpoint_dir(), resume.as_deref())?;
        let path = checkpoint.path.clone();
        let saved: E = ron::de::from_str(&checkpoint.meta.config).with_context(|| {
            format!(
                "{}: the embedded experiment is not one `{}` reads (a checkpoint of the other \
                 task?)",
                path.display(),
                command.binary
            )
        })?;
        accept_differences(
            &path,
            &engine.resume_differences(&checkpoint, &saved, experiment),
        )?;
        engine.resume_from(checkpoint).map_err(&explain)?;
        let state = engine.state();
        println!(
            "resumed from {} at step {} (epoch {}, batch {})",
            path.display(),
            state.step,
            state.epoch,
            state.batch_in_epoch
        );
    } else if let Some(path) = &args.init_from {
        let path: PathBuf = resolve_checkpoint(path)?;
        let report = engine.init_weights_from(&path).map_err(&explain)?;
        println!("initialised from {}:\n{report}", path.display());
    }
    let mut observer = ProgressObserver::new(
        args.quiet,
        engine.stop_step(),
        engine.state().step,
        engine.train_config().log_every_steps,
    );
    if let Some(run_dir) = command.curves_in {
        observer = observer.with_curves(run_dir);
    }
    let result = engine.run(&mut observer);
    observer.finish();
    let summary = result.map_err(&explain)?;
    if summary.stopped {
        let resume = resume_command(command.binary, &args.config, &args.set);
        let checkpoint = summary.last_checkpoint.as_deref();
        println!("{}", stopped_report(summary.steps, checkpoint, &resume));
        return Ok(Outcome::Stopped);
    }
    println!(
        "finished at step {} in {:.1} s{}",
        summary.steps,
        summary.seconds,
        summary
            .last_checkpoint
            .as_ref()
            .map(|p| format!("; checkpoint {}", p.display()))
            .unwrap_or_default()
    );
    if let Some(report) = &summary.final_report {
        println!("{}", report.summary());
    }
    Ok(Outcome::Finished)
}

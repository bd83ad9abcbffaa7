//! `train-sam2 CONFIG [--resume [FILE]] [--init-from FILE] [--set key=value]… [--print-config]
//! [--write-embeddings [--encoder CHECKPOINT]] [--quiet]`.

use std::path::PathBuf;

use anyhow::Context;
use burn::backend::Autodiff;
use burn::tensor::backend::{AutodiffBackend, Backend};
use indicatif::ProgressBar;
use segburn_train::checkpoint::{load_checkpoint, resolve_checkpoint};
use segburn_train::sam::write_embeddings::{encoder_model, write_cached_embeddings};
use segburn_train::sam::{Sam2Event, Sam2Observer, Sam2Trainer};

use crate::commands::interrupt::{resume_command, stop_on_interrupt, stopped_report, Outcome};
use crate::device::{dispatch, only, BackendJob};
use crate::experiment::resume_check::{accept_differences, choose_checkpoint};
use crate::experiment::sam2::{resume_differences, Sam2Experiment};
use crate::output::progress::{checkpoint_line, step_bar};

/// Parsed `train-sam2` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "train-sam2",
    about = "Train SAM2-style promptable segmentation (prompt encoder + mask decoder, optionally our image encoder) from an experiment file (RON)"
)]
pub struct TrainSam2Args {
    /// The experiment file, e.g. configs/sam2_decoder.ron.
    pub config: PathBuf,
    /// Continue the run: from its newest checkpoint, or from PATH (a checkpoint, a run
    /// directory, or a run's checkpoints/latest or checkpoints/best).
    #[arg(long, num_args = 0..=1, value_name = "PATH")]
    pub resume: Option<Option<PathBuf>>,
    /// Start from these weights only: an official SAM2/SAM2.1 .pt/.safetensors (with a Hiera
    /// encoder, the whole image model, loaded strictly; otherwise the heads) or a segburn
    /// checkpoint (a file, a run directory, or a run's checkpoints/latest or checkpoints/best).
    #[arg(long, value_name = "PATH", conflicts_with = "resume")]
    pub init_from: Option<PathBuf>,
    /// Override a field: --set train.lr=0.0001 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the fully resolved experiment and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Write the cached embeddings of the train and val splits to data.embeddings and exit.
    #[arg(long, conflicts_with_all = ["resume", "init_from"])]
    pub write_embeddings: bool,
    /// With --write-embeddings: the checkpoint whose image encoder makes the embeddings: an
    /// official SAM 2.1 checkpoint (sam2.1_hiera_tiny.pt, …), or a run trained end to end (a
    /// checkpoint file, the run directory, or its checkpoints/latest or checkpoints/best);
    /// without it a fresh encoder.
    #[arg(long, value_name = "CHECKPOINT", requires = "write_embeddings")]
    pub encoder: Option<PathBuf>,
    /// Plain log lines instead of a progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `train-sam2`; [`Outcome::exit_code`] is the process's exit status.
pub fn run(args: &TrainSam2Args) -> anyhow::Result<Outcome> {
    let experiment = Sam2Experiment::load(&args.config, &args.set)?;
    if args.print_config {
        println!("{}", experiment.to_ron());
        return Ok(Outcome::Finished);
    }
    dispatch(
        &experiment.device.single().into(),
        "use --set device=Cpu",
        (&experiment, args),
    )
}

/// `train-sam2` (or `--write-embeddings`) on the dispatcher's backend, one device.
impl BackendJob<Outcome> for (&Sam2Experiment, &TrainSam2Args) {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<Outcome> {
        run_on::<Autodiff<B>>(self.0, only(devices), self.1)
    }
}

fn run_on<B: AutodiffBackend>(
    experiment: &Sam2Experiment,
    device: B::Device,
    args: &TrainSam2Args,
) -> anyhow::Result<Outcome> {
    if args.write_embeddings {
        write_embeddings::<B::InnerBackend>(experiment, &device, args)?;
        return Ok(Outcome::Finished);
    }
    // From here on, a Ctrl-C stops at the next step boundary (or before the first step).
    let stop = stop_on_interrupt()?;
    let mut trainer = Sam2Trainer::<B>::new(experiment.setup(), device)?.with_stop_signal(stop);
    if let Some(resume) = &args.resume {
        let checkpoint = choose_checkpoint(trainer.checkpoint_dir(), resume.as_deref())?;
        let path = checkpoint.path.clone();
        let saved: Sam2Experiment =
            ron::de::from_str(&checkpoint.meta.config).with_context(|| {
                format!(
                    "{}: the embedded experiment is not a SAM2 experiment (a PIDNet checkpoint?)",
                    path.display()
                )
            })?;
        let (breaking, harmless) = resume_differences(&saved, experiment);
        accept_differences(&path, &breaking, &harmless)?;
        trainer.resume_from(checkpoint)?;
        let state = trainer.state();
        println!(
            "resumed from {} at step {} (epoch {}, batch {})",
            path.display(),
            state.step,
            state.epoch,
            state.batch_in_epoch
        );
    } else if let Some(path) = &args.init_from {
        let path = resolve_checkpoint(path)?;
        let report = trainer.init_weights_from(&path)?;
        println!("initialised from {}:\n{report}", path.display());
    }
    let mut observer = Progress::new(
        args.quiet,
        trainer.stop_step(),
        trainer.state().step,
        experiment.train.log_every_steps,
    );
    let result = trainer.run(&mut observer);
    if let Some(bar) = &observer.bar {
        bar.finish_and_clear();
    }
    let summary = result?;
    if summary.stopped {
        let resume = resume_command("train-sam2", &args.config, &args.set);
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
        println!("{report}");
    }
    Ok(Outcome::Finished)
}

fn write_embeddings<B: Backend>(
    experiment: &Sam2Experiment,
    device: &B::Device,
    args: &TrainSam2Args,
) -> anyhow::Result<()> {
    // A decoder-only config says nothing of the encoder: take its sizes from the checkpoint's
    // own experiment.
    let encoder = args
        .encoder
        .as_deref()
        .map(resolve_checkpoint)
        .transpose()?;
    let mut model_config = experiment.model.clone();
    // An official SAM 2.1 file is no segburn checkpoint: its encoder is found from its keys.
    let segburn_checkpoint = encoder.as_deref().map(load_checkpoint).and_then(Result::ok);
    if let (true, Some(checkpoint)) = (model_config.image_encoder.is_none(), segburn_checkpoint) {
        let saved: Sam2Experiment = ron::de::from_str(&checkpoint.meta.config)
            .with_context(|| format!("{}: not a SAM2 checkpoint", checkpoint.path.display()))?;
        model_config.image_encoder = saved.model.image_encoder;
    }
    let model = encoder_model::<B>(&model_config, encoder.as_deref(), device)?;
    let source = match &encoder {
        Some(path) => path.display().to_string(),
        None => {
            println!(
                "no --encoder given: writing embeddings of a freshly initialised encoder (fine for \
                 trying the pipeline; use a trained checkpoint for real work)"
            );
            "a freshly initialised encoder".to_string()
        }
    };
    let data = &experiment.data;
    let splits = vec![data.train_split.clone(), data.val_split.clone()];
    let summaries = write_cached_embeddings(
        &model,
        data,
        &splits,
        experiment.model.image_size,
        device,
        &source,
        &mut |split, done, total| {
            if !args.quiet && (done == total || done % 10 == 0) {
                println!("{split}: {done}/{total}");
            }
        },
    )?;
    for s in summaries {
        println!(
            "{}: {} embeddings ({:.1} MB) in {}",
            s.split,
            s.files,
            s.bytes as f64 / 1e6,
            s.dir.display()
        );
    }
    Ok(())
}

/// Renders training events: an indicatif bar on a terminal, plain lines with `--quiet`.
struct Progress {
    bar: Option<ProgressBar>,
    log_every: u64,
}

impl Progress {
    fn new(quiet: bool, stop: u64, first: u64, log_every: u64) -> Self {
        let bar = step_bar(quiet, stop, first);
        Self { bar, log_every }
    }

    fn print(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }
}

impl Sam2Observer for Progress {
    fn event(&mut self, event: &Sam2Event) {
        match event {
            Sam2Event::Message(m) => self.print(m),
            Sam2Event::Step(r) => {
                let loss = r.loss.map_or("no object".to_string(), |l| {
                    format!(
                        "loss {:.4} (mask {:.4} dice {:.4})",
                        l.total, l.mask, l.dice
                    )
                });
                let message = format!(
                    "epoch {} {loss} lr {:.2e} {} objects {:.2} s/step",
                    r.epoch, r.lr, r.objects, r.seconds
                );
                match &self.bar {
                    Some(bar) => {
                        bar.set_position(r.step);
                        bar.set_message(message);
                    }
                    None if r.step % self.log_every == 0 || r.step == r.total_steps => {
                        println!("step {}/{} {message}", r.step, r.total_steps)
                    }
                    None => {}
                }
            }
            Sam2Event::Validation { step, report } => {
                self.print(&format!("evaluation at step {step}: {report}"))
            }
            Sam2Event::Checkpoint {
                path,
                bytes,
                seconds,
                ..
            } => self.print(&checkpoint_line(path, *bytes, *seconds)),
        }
    }
}

//! `train-sam2 CONFIG [--resume [FILE]] [--init-from FILE] [--set key=value]… [--print-config]
//! [--write-embeddings [--encoder CHECKPOINT]] [--quiet]`.

use std::path::PathBuf;

use anyhow::Context;
use burn::backend::Autodiff;
use burn::tensor::backend::{AutodiffBackend, Backend};
use segburn_train::checkpoint::{load_checkpoint, resolve_checkpoint};
use segburn_train::sam2::write_embeddings::{encoder_model, write_cached_embeddings};
use segburn_train::sam2::Sam2Trainer;

use crate::commands::interrupt::{stop_on_interrupt, Outcome};
use crate::commands::training::{train, TrainingArgs, TrainingCommand};
use crate::device::{dispatch, BackendJob};
use crate::experiment::sam2::Sam2Experiment;
use crate::experiment::ExperimentFile;

/// Parsed `train-sam2` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "train-sam2",
    about = "Train SAM2 promptable segmentation (SAM 2.1's prompt encoder and mask decoder; SAM 2.1's Hiera encoder, our CNN, or cached embeddings) from an experiment file (RON) on the same training engine as `train` (accumulation, data-parallel replicas, mixed precision, exact resume)"
)]
pub struct TrainSam2Args {
    #[command(flatten)]
    pub run: TrainingArgs,
    /// Write the cached embeddings of the train and val splits to data.embeddings and exit.
    #[arg(long, conflicts_with_all = ["resume", "init_from"])]
    pub write_embeddings: bool,
    /// With --write-embeddings: the checkpoint whose image encoder makes the embeddings: an
    /// official SAM 2.1 checkpoint (sam2.1_hiera_tiny.pt, …), or a run trained end to end (a
    /// checkpoint file, the run directory, or its checkpoints/latest or checkpoints/best);
    /// without it a fresh encoder.
    #[arg(long, value_name = "CHECKPOINT", requires = "write_embeddings")]
    pub encoder: Option<PathBuf>,
}

/// Runs `train-sam2`; [`Outcome::exit_code`] is the process's exit status.
pub fn run(args: &TrainSam2Args) -> anyhow::Result<Outcome> {
    let experiment = Sam2Experiment::load(&args.run.config, &args.run.set)?;
    if args.run.print_config {
        println!("{}", experiment.to_ron());
        return Ok(Outcome::Finished);
    }
    dispatch(
        &experiment.device,
        "use --set device=Cpu",
        (&experiment, args),
    )
}

/// `train-sam2` (or `--write-embeddings`, on the first device) on the dispatcher's backend.
impl BackendJob<Outcome> for (&Sam2Experiment, &TrainSam2Args) {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<Outcome> {
        run_on::<Autodiff<B>>(self.0, devices, self.1)
    }
}

fn run_on<B: AutodiffBackend>(
    experiment: &Sam2Experiment,
    devices: Vec<B::Device>,
    args: &TrainSam2Args,
) -> anyhow::Result<Outcome> {
    if args.write_embeddings {
        write_embeddings::<B::InnerBackend>(experiment, &devices[0], args)?;
        return Ok(Outcome::Finished);
    }
    // From here on, a Ctrl-C stops at the next step boundary (or before the first step).
    let stop = stop_on_interrupt()?;
    let trainer = Sam2Trainer::<B>::with_devices(experiment.setup(), devices)?
        .replicate_single_device(experiment.device.replicated())
        .with_stop_signal(stop);
    let command = TrainingCommand {
        binary: "train-sam2",
        args: &args.run,
        curves_in: None,
    };
    train(trainer, experiment, &command, anyhow::Error::from)
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
            if !args.run.quiet && (done == total || done % 10 == 0) {
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

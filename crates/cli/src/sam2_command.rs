//! `train-sam2 CONFIG [--resume [FILE]] [--init-from FILE] [--set key=value]… [--print-config]
//! [--write-embeddings [--encoder CHECKPOINT]] [--quiet]`.

use std::path::PathBuf;

use anyhow::Context;
use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::{AutodiffBackend, Backend};
use segburn_train::checkpoint::{load_checkpoint, resolve_checkpoint};
use segburn_train::sam2::write_embeddings::{encoder_model, write_cached_embeddings};
use segburn_train::sam2::Sam2Trainer;

use crate::experiment::DeviceConfig;
use crate::interrupt::{stop_on_interrupt, Outcome};
use crate::sam2_experiment::Sam2Experiment;
use crate::training::{train, TrainingCommand};

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
    match &experiment.device {
        DeviceConfig::Cpu => run_on::<Autodiff<Flex>>(&experiment, vec![Default::default()], args),
        DeviceConfig::CpuReplicas(n) => {
            run_on::<Autodiff<Flex>>(&experiment, vec![Default::default(); *n], args)
        }
        DeviceConfig::Cuda(ids) => run_on_cuda(&experiment, &ids.to_vec(), args),
    }
}

#[cfg(feature = "cuda")]
fn run_on_cuda(
    experiment: &Sam2Experiment,
    ids: &[usize],
    args: &TrainSam2Args,
) -> anyhow::Result<Outcome> {
    use burn::backend::cuda::CudaDevice;
    use burn::backend::Cuda;
    let devices = ids.iter().map(|&i| CudaDevice::new(i)).collect();
    run_on::<Autodiff<Cuda>>(experiment, devices, args)
}

#[cfg(not(feature = "cuda"))]
fn run_on_cuda(_: &Sam2Experiment, _: &[usize], _: &TrainSam2Args) -> anyhow::Result<Outcome> {
    anyhow::bail!(
        "the experiment asks for device Cuda, but this build has no CUDA support; rebuild with \
         `cargo build --release --features cuda`, or use --set device=Cpu"
    )
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
        config: &args.config,
        overrides: &args.set,
        resume: args.resume.as_ref().map(Option::as_deref),
        init_from: args.init_from.as_deref(),
        quiet: args.quiet,
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

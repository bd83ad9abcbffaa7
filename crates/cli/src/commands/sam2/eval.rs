//! `eval-sam2 CONFIG --checkpoint FILE [--corrections K] [--split NAME] [--set key=value]…
//! [--json FILE]`: mean mask IoU for one click, one box, and after K correction clicks; with
//! `--video DIR`, J&F of tracking on a VOS dataset ([`crate::commands::sam2::eval_video`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use burn::tensor::backend::Backend;
use segburn_data::objects::ObjectDataset;
use segburn_models::sam2::{import, Sam2};
use segburn_train::checkpoint::{load_checkpoint, resolve_checkpoint, CheckpointError};
use segburn_train::compute_threads::on_compute_pool;
use segburn_train::sam2::{evaluate, Sam2ModelConfig};

use crate::device::{dispatch, only, BackendJob};
use crate::experiment::sam2::Sam2Experiment;
use crate::experiment::ExperimentFile;

/// Parsed `eval-sam2` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "eval-sam2",
    about = "Interactive-segmentation evaluation of a SAM2 checkpoint: mean mask IoU after 1 click, 1 box and K correction clicks"
)]
pub struct EvalSam2Args {
    /// The experiment file (its data section says which objects to evaluate on); not with
    /// --video.
    #[arg(required_unless_present = "video")]
    pub config: Option<PathBuf>,
    /// Evaluate tracking instead: the VOS dataset at DIR (JPEGImages/<video>/,
    /// Annotations/<video>/, ImageSets/<split>.txt; DAVIS 2017's JPEGImages/480p/ and
    /// Annotations/480p/ are found too), semi-supervised (each object's mask on
    /// its first annotated frame), J&F as DAVIS 2017 computes it. --checkpoint is then an
    /// official SAM 2.1 checkpoint with its video memory.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["corrections", "set"])]
    pub video: Option<PathBuf>,
    /// With --video: where to write the predicted masks (`<DIR>/<video>/<frame>.png`).
    #[arg(long, value_name = "DIR", requires = "video")]
    pub out: Option<PathBuf>,
    /// With --video: the model configuration of a checkpoint of another shape than the four
    /// official ones (a JSON Sam2Config with `video`).
    #[arg(long, value_name = "FILE", requires = "video")]
    pub model_config: Option<PathBuf>,
    /// With --video: where the model runs (Cpu, Wgpu(N), Cuda(N)); the experiment's device
    /// otherwise.
    #[arg(long, value_name = "DEVICE", requires = "video", value_parser = crate::commands::sam2::predict_args::parse_device)]
    pub device: Option<crate::device::DeviceConfig>,
    /// A segburn SAM2 checkpoint, a run directory (its newest checkpoint), a run's
    /// checkpoints/latest or checkpoints/best, or an official SAM2/SAM2.1 file (heads only).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: PathBuf,
    /// Correction clicks after the first click (default: prompts.eval_corrections).
    #[arg(long, value_name = "K")]
    pub corrections: Option<usize>,
    /// The split to evaluate (default: data.val_split).
    #[arg(long)]
    pub split: Option<String>,
    /// Override a field: --set data.eval_objects_per_image=8 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Also write the report as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: &EvalSam2Args) -> anyhow::Result<()> {
    if let Some(root) = &args.video {
        return crate::commands::sam2::eval_video::run(args, root);
    }
    let args = &EvalSam2Args {
        checkpoint: resolve_checkpoint(&args.checkpoint)?,
        ..args.clone()
    };
    let Some(config) = &args.config else {
        bail!("give the experiment file (or --video DIR)");
    };
    let experiment = Sam2Experiment::load(config, &args.set)?;
    dispatch(
        &experiment.device.single().into(),
        "use --set device=Cpu",
        (&experiment, args),
    )
}

/// [`eval_on`] on the dispatcher's backend: (experiment, arguments).
impl BackendJob<()> for (&Sam2Experiment, &EvalSam2Args) {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<()> {
        eval_on::<B>(self.0, only(devices), self.1)
    }
}

/// The model of `config` with the weights of `path` (a resolved checkpoint argument): a segburn
/// checkpoint (strict) or an official SAM2 file (the heads; our encoder, if any, stays as initialised — reported).
pub fn load_model<B: Backend>(
    config: &Sam2ModelConfig,
    path: &Path,
    device: &B::Device,
) -> anyhow::Result<Sam2<B>> {
    let model = config.sam2().init::<B>(device);
    let name = path.display().to_string();
    match load_checkpoint(path) {
        Ok(checkpoint) => {
            let saved_encoder = checkpoint
                .model
                .keys()
                .any(|k| k.starts_with("image_encoder."));
            if config.image_encoder.is_some() && !saved_encoder {
                bail!(
                    "{name} has no image encoder but model.image_encoder is set: evaluate it with \
                     a cached-embedding config (model.image_encoder: None, data.embeddings)"
                );
            }
            let (model, _) = import::load_sam2_tensors(model, &checkpoint.model, true, &name)
                .with_context(|| format!("{name} does not fit the model section of the config"))?;
            Ok(model)
        }
        Err(CheckpointError::NotACheckpoint { .. }) => {
            let (model, report) = import::load_official(model, path, true)?;
            println!("loaded the heads of {name}:\n{report}");
            if config.image_encoder.is_some() && !config.image_encoder.is_hiera() {
                println!(
                    "note: official checkpoints carry no weights for our image encoder; it keeps \
                     its initial weights"
                );
            }
            Ok(model)
        }
        Err(other) => Err(other.into()),
    }
}

fn eval_on<B: Backend>(
    experiment: &Sam2Experiment,
    device: B::Device,
    args: &EvalSam2Args,
) -> anyhow::Result<()> {
    let model = load_model::<B>(&experiment.model, &args.checkpoint, &device)?;
    let data = &experiment.data;
    let split = args.split.as_deref().unwrap_or(&data.val_split);
    let dataset = ObjectDataset::new(
        data,
        split,
        experiment.model.image_size,
        experiment.train.seed,
    )?;
    let corrections = args
        .corrections
        .unwrap_or(experiment.prompts.eval_corrections);
    // On a compute-pool thread, as the PIDNet inference modes run (`on_compute_pool`).
    let report = on_compute_pool(|| {
        evaluate(
            &model,
            &dataset,
            corrections,
            experiment.model.gate_masks_by_object_score,
            &device,
        )
    })?;
    println!("{} split `{split}`, {}", args.checkpoint.display(), report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

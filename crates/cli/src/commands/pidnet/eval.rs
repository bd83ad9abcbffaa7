//! `eval CONFIG --checkpoint FILE [--mode whole|slide] [--crop H,W --stride H,W]
//! [--scales S,…] [--flip] [--precision f32|bf16] [--out DIR] [--save-predictions]
//! [--set key=value]…`: the metrics of a checkpoint on the experiment's validation split.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use burn::tensor::backend::Backend;
use indicatif::{ProgressBar, ProgressStyle};
use segburn_data::label_ids::is_cityscapes;
use segburn_data::{DatasetIndex, Loader, Mode};
use segburn_train::checkpoint::resolve_checkpoint;
use segburn_train::inference::{EvalStep, Evaluator, InferenceConfig};
use segburn_train::metric::{ConfusionMatrix, MetricReport};
use serde::Serialize;

use crate::commands::pidnet::inference_args::InferenceArgs;
use crate::commands::pidnet::model_source::load_model;
use crate::device::{dispatch, only, BackendJob};
use crate::experiment::ExperimentFile;
use crate::experiment::PidNetExperiment;
use crate::output::confusion_files::{confusion_csv, write_heatmap};
use crate::output::pictures::{denormalise, PictureWriter, Prediction};

/// Parsed `eval` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "eval",
    about = "Evaluate a checkpoint on the experiment's validation split (mIoU, accuracy, confusion matrix)"
)]
pub struct EvalArgs {
    /// The experiment file (its data, model and device sections are used).
    pub config: PathBuf,
    /// A segburn checkpoint, a run directory (its newest checkpoint), a run's
    /// checkpoints/latest or checkpoints/best, or official PIDNet weights (.pt, .pth,
    /// .safetensors).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: PathBuf,
    #[command(flatten)]
    pub inference: InferenceArgs,
    /// Where the results go (default: <run dir>/eval).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write trainId, labelId (Cityscapes), colour and overlay PNGs of every image.
    #[arg(long)]
    pub save_predictions: bool,
    /// Override a field of the experiment: --set data.val_split=val (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// What an evaluation produced.
#[derive(Debug, Clone)]
pub struct EvalOutcome {
    pub report: MetricReport,
    pub matrix: ConfusionMatrix,
    pub out_dir: PathBuf,
    pub images: usize,
    pub seconds: f64,
}

/// The settings of an evaluation, written beside the metrics.
#[derive(Debug, Serialize)]
struct EvalSettings<'a> {
    checkpoint: &'a Path,
    split: &'a str,
    inference: &'a InferenceConfig,
    images: usize,
    seconds: f64,
}

pub fn run(args: &EvalArgs) -> anyhow::Result<()> {
    let experiment = PidNetExperiment::load(&args.config, &args.set)?;
    let inference = args.inference.config()?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| experiment.train.run_dir.join("eval"));
    let checkpoint = resolve_checkpoint(&args.checkpoint)?;
    let options = EvalOptions {
        checkpoint: &checkpoint,
        inference,
        out_dir: &out_dir,
        save_predictions: args.save_predictions,
        progress: !args.quiet,
    };
    let outcome = dispatch(
        &experiment.device.single().into(),
        "evaluate on the CPU with --set device=Cpu",
        (&experiment, &options),
    )?;
    println!("{}", outcome.report);
    println!(
        "{} images in {:.1} s ({:.2} images/s); results in {}",
        outcome.images,
        outcome.seconds,
        outcome.images as f64 / outcome.seconds.max(1e-9),
        outcome.out_dir.display()
    );
    Ok(())
}

/// [`evaluate`] on the dispatcher's backend.
impl BackendJob<EvalOutcome> for (&PidNetExperiment, &EvalOptions<'_>) {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<EvalOutcome> {
        evaluate::<B>(self.0, self.1, &only(devices))
    }
}

/// What to evaluate and where the results go.
#[derive(Debug, Clone)]
pub struct EvalOptions<'a> {
    pub checkpoint: &'a Path,
    pub inference: InferenceConfig,
    pub out_dir: &'a Path,
    pub save_predictions: bool,
    pub progress: bool,
}

/// Evaluates `options.checkpoint` on the validation split of `experiment` and writes
/// `metrics.json`, `metrics.csv`, `confusion.csv`, `confusion.png` and `settings.json` (and
/// `predictions/` when asked) into `options.out_dir`.
pub fn evaluate<B: Backend>(
    experiment: &PidNetExperiment,
    options: &EvalOptions<'_>,
    device: &B::Device,
) -> anyhow::Result<EvalOutcome> {
    let data = &experiment.data;
    let index = DatasetIndex::new(&data.layout, &data.val_split, data.ignore_index)?;
    let classes = index.label_map().classes().to_vec();
    let palette = index.label_map().palette().to_vec();
    if classes.len() != experiment.model.num_classes {
        bail!(
            "model.num_classes is {} but the dataset has {} classes ({})",
            experiment.model.num_classes,
            classes.len(),
            index.label_map().description()
        );
    }
    let loader = Loader::new(index, data, Mode::Validation, experiment.train.seed)?;
    let model = load_model::<B>(&experiment.model.pidnet(), options.checkpoint, device)?;
    let evaluator = Evaluator::<B, _>::new(
        &model,
        options.inference.clone(),
        classes.len(),
        i64::from(data.ignore_index),
        device.clone(),
    )?;
    let out_dir = options.out_dir;
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let pictures = if options.save_predictions {
        Some(PictureWriter::new(
            &out_dir.join("predictions"),
            &palette,
            is_cityscapes(&classes),
        )?)
    } else {
        None
    };
    let bar = progress_bar(options.progress, loader.batches_per_epoch() as u64);
    let (mean, std) = (data.augment.mean, data.augment.std);
    let mut images = 0usize;
    let started = Instant::now();
    let mut on_batch =
        |step: &EvalStep<'_>| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            let batch = step.batch;
            images += batch.batch_size;
            if let Some(writer) = &pictures {
                let pixels = batch.width * batch.height;
                for (i, name) in batch.names.iter().enumerate() {
                    let rgb = denormalise(
                        &batch.images[3 * i * pixels..3 * (i + 1) * pixels],
                        mean,
                        std,
                    );
                    writer.write(&Prediction {
                        name,
                        width: batch.width,
                        height: batch.height,
                        classes: &step.predictions[i * pixels..(i + 1) * pixels],
                        rgb: &rgb,
                    })?;
                }
            }
            bar.set_position(step.done as u64);
            bar.set_message(batch.names.last().cloned().unwrap_or_default());
            Ok(())
        };
    let matrix = evaluator.run(&loader, &mut on_batch)?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let report = MetricReport::new(&matrix, &classes)?;
    report.write_json(&out_dir.join("metrics.json"))?;
    report.write_csv(&out_dir.join("metrics.csv"))?;
    let confusion = out_dir.join("confusion.csv");
    std::fs::write(&confusion, confusion_csv(&matrix, &classes))
        .with_context(|| format!("cannot write {}", confusion.display()))?;
    write_heatmap(&matrix, &classes, &out_dir.join("confusion.png"))?;
    let settings = EvalSettings {
        checkpoint: options.checkpoint,
        split: &data.val_split,
        inference: &options.inference,
        images,
        seconds,
    };
    let settings_path = out_dir.join("settings.json");
    std::fs::write(&settings_path, serde_json::to_string_pretty(&settings)?)
        .with_context(|| format!("cannot write {}", settings_path.display()))?;
    Ok(EvalOutcome {
        report,
        matrix,
        out_dir: out_dir.to_path_buf(),
        images,
        seconds,
    })
}

fn progress_bar(visible: bool, total: u64) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30.cyan/blue} {pos}/{len} batches [{elapsed_precise} < {eta_precise}] {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

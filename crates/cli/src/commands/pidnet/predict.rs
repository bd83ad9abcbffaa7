//! `predict --checkpoint FILE INPUT… --out DIR [--config FILE]`: coloured masks, overlays and
//! raw trainId PNGs (plus Cityscapes labelIds) for images and folders of images.
//!
//! An unreadable input is reported and skipped; the others are still predicted, and the run
//! ends with a non-zero exit code naming every failure.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use segburn_data::augment::Normaliser;
use segburn_data::decode::read_image;
use segburn_data::label_ids::is_cityscapes;
use segburn_data::{DatasetIndex, LabelMap};
use segburn_models::pidnet::PidNet;
use segburn_train::checkpoint::resolve_checkpoint;
use segburn_train::inference::{predict_classes, InferenceConfig};

use crate::commands::pidnet::inference_args::InferenceArgs;
use crate::commands::pidnet::model_source::{embedded_experiment, load_model};
use crate::device::{dispatch, only, BackendJob};
use crate::error_chain::render;
use crate::experiment::overrides::apply_overrides;
use crate::experiment::ExperimentFile;
use crate::experiment::{absolute, PidNetExperiment};
use crate::output::pictures::{file_stem, PictureWriter, Prediction};

/// Parsed `predict` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "predict",
    about = "Predict segmentation masks for images (PNG/JPEG files or folders of them)"
)]
pub struct PredictArgs {
    /// A segburn checkpoint, a run directory (its newest checkpoint), a run's
    /// checkpoints/latest or checkpoints/best, or official PIDNet weights (then --config is
    /// needed).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: PathBuf,
    /// Images, or folders whose .png/.jpg/.jpeg files are read (not recursively).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Where the pictures go: DIR/colour, DIR/overlay, DIR/train_ids (and DIR/label_ids).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The experiment (classes, normalisation, device); default: the one in the checkpoint.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub inference: InferenceArgs,
    /// Override a field of the experiment (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// One input that could not be predicted.
#[derive(Debug, Clone)]
pub struct Failure {
    pub path: PathBuf,
    pub message: String,
}

/// What a prediction run did.
#[derive(Debug, Clone, Default)]
pub struct PredictOutcome {
    pub written: Vec<PathBuf>,
    pub predicted: usize,
    pub failures: Vec<Failure>,
}

pub fn run(args: &PredictArgs) -> anyhow::Result<()> {
    let args = &PredictArgs {
        checkpoint: resolve_checkpoint(&args.checkpoint)?,
        ..args.clone()
    };
    let experiment = match &args.config {
        Some(path) => PidNetExperiment::load(path, &args.set)?,
        None => apply_overrides(embedded_experiment(&args.checkpoint)?, &args.set)?,
    };
    let inference = args.inference.config()?;
    let job = (&experiment, args, &inference);
    let outcome = dispatch(
        &experiment.device.single().into(),
        "predict on the CPU with --set device=Cpu",
        job,
    )?;
    println!(
        "{} image(s) predicted into {}",
        outcome.predicted,
        absolute(&args.out).display()
    );
    if !outcome.failures.is_empty() {
        let list: Vec<String> = outcome
            .failures
            .iter()
            .map(|f| format!("  {}: {}", f.path.display(), f.message))
            .collect();
        bail!(
            "{} input(s) could not be predicted:\n{}",
            outcome.failures.len(),
            list.join("\n")
        );
    }
    Ok(())
}

/// [`predict`] on the dispatcher's backend: (experiment, arguments, inference settings).
impl BackendJob<PredictOutcome> for (&PidNetExperiment, &PredictArgs, &InferenceConfig) {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<PredictOutcome> {
        predict::<B>(self.0, self.1, self.2, &only(devices))
    }
}

/// The class names and colours of the experiment's dataset; without the dataset at hand (e.g.
/// predicting on another machine), those of its label encoding when it is known from the layout.
fn label_map(experiment: &PidNetExperiment) -> anyhow::Result<LabelMap> {
    let data = &experiment.data;
    match DatasetIndex::new(&data.layout, &data.val_split, data.ignore_index) {
        Ok(index) => Ok(index.label_map().clone()),
        Err(error) => {
            // The layouts of known datasets fix their classes whatever the files say.
            let encoding = match &data.layout {
                segburn_data::Layout::Cityscapes { .. }
                | segburn_data::Layout::CamVid { .. }
                | segburn_data::Layout::Ade20k { .. }
                | segburn_data::Layout::PascalVoc { .. } => data.layout.encoding(),
                _ => {
                    return Err(anyhow::anyhow!(error)).context(
                        "the class colours come from the experiment's dataset, which cannot be read here",
                    )
                }
            };
            Ok(LabelMap::new(&encoding, data.ignore_index)?)
        }
    }
}

/// Predicts every input of `args` and writes the pictures; failures are collected, not fatal.
pub fn predict<B: Backend>(
    experiment: &PidNetExperiment,
    args: &PredictArgs,
    inference: &InferenceConfig,
    device: &B::Device,
) -> anyhow::Result<PredictOutcome> {
    let labels = label_map(experiment)?;
    if labels.num_classes() != experiment.model.num_classes {
        bail!(
            "model.num_classes is {} but the dataset has {} classes",
            experiment.model.num_classes,
            labels.num_classes()
        );
    }
    let model = load_model::<B>(&experiment.model.pidnet(), &args.checkpoint, device)?;
    let writer = PictureWriter::new(&args.out, labels.palette(), is_cityscapes(labels.classes()))?;
    let normaliser = Normaliser::new(experiment.data.augment.mean, experiment.data.augment.std);
    let mut outcome = PredictOutcome::default();
    let (files, failures) = collect_inputs(&args.inputs);
    outcome.failures = failures;
    let mut used = HashSet::new();
    for path in files {
        let stem = unique_stem(&path, &mut used);
        match predict_one(
            &model,
            &path,
            &stem,
            &normaliser,
            inference,
            &writer,
            device,
        ) {
            Ok(mut written) => {
                println!("{}", path.display());
                outcome.predicted += 1;
                outcome.written.append(&mut written);
            }
            Err(error) => {
                let message = render(error.as_ref());
                eprintln!("skipped {}: {message}", path.display());
                outcome.failures.push(Failure { path, message });
            }
        }
    }
    Ok(outcome)
}

fn predict_one<B: Backend>(
    model: &PidNet<B>,
    path: &Path,
    stem: &str,
    normaliser: &Normaliser,
    inference: &InferenceConfig,
    writer: &PictureWriter,
    device: &B::Device,
) -> anyhow::Result<Vec<PathBuf>> {
    let image = read_image(path)?;
    let (width, height) = (image.width, image.height);
    let pixels = width * height;
    let mut planar = vec![0f32; 3 * pixels];
    for (i, rgb) in image.pixels.chunks_exact(3).enumerate() {
        for channel in 0..3 {
            planar[channel * pixels + i] = normaliser.value(channel, rgb[channel]);
        }
    }
    let input = Tensor::<B, 4>::from_data(TensorData::new(planar, [1, 3, height, width]), device);
    // Sizes that are not multiples of 8 are padded inside the inference and cropped back.
    let classes: Vec<u8> = predict_classes(model, input, inference)?
        .into_data()
        .iter::<i64>()
        .map(|c| c.clamp(0, 255) as u8)
        .collect();
    Ok(writer.write(&Prediction {
        name: stem,
        width,
        height,
        classes: &classes,
        rgb: &image.pixels,
    })?)
}

fn is_image_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
}

/// Files to predict, in order (folders sorted by name), and the inputs that are not there.
pub fn collect_inputs(inputs: &[PathBuf]) -> (Vec<PathBuf>, Vec<Failure>) {
    let mut files = Vec::new();
    let mut failures = Vec::new();
    for input in inputs {
        if input.is_dir() {
            match std::fs::read_dir(input) {
                Ok(entries) => {
                    let mut found: Vec<PathBuf> = entries
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.is_file() && is_image_name(p))
                        .collect();
                    found.sort();
                    if found.is_empty() {
                        failures.push(Failure {
                            path: input.clone(),
                            message: "the folder has no .png, .jpg or .jpeg files".into(),
                        });
                    }
                    files.extend(found);
                }
                Err(e) => failures.push(Failure {
                    path: input.clone(),
                    message: format!("cannot list the folder: {e}"),
                }),
            }
        } else if input.is_file() {
            files.push(input.clone());
        } else {
            failures.push(Failure {
                path: input.clone(),
                message: "no such file or folder".into(),
            });
        }
    }
    (files, failures)
}

/// The file stem of `path`, with `_2`, `_3`, … when an earlier input had the same one.
fn unique_stem(path: &Path, used: &mut HashSet<String>) -> String {
    let base = file_stem(
        &path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let mut stem = base.clone();
    let mut n = 2;
    while !used.insert(stem.clone()) {
        stem = format!("{base}_{n}");
        n += 1;
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_collected_sorted_and_missing_ones_reported() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("données d'essai");
        std::fs::create_dir_all(folder.join("nested")).unwrap();
        for name in ["b.PNG", "a.jpg", "notes.txt"] {
            std::fs::write(folder.join(name), b"x").unwrap();
        }
        let missing = dir.path().join("absent.png");
        let (files, failures) = collect_inputs(&[folder.clone(), missing.clone()]);
        assert_eq!(files, vec![folder.join("a.jpg"), folder.join("b.PNG")]);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].path, missing);
        let mut used = HashSet::new();
        assert_eq!(unique_stem(Path::new("x/a.png"), &mut used), "a");
        assert_eq!(unique_stem(Path::new("y/a.jpg"), &mut used), "a_2");
    }
}

//! `predict-sam2 --checkpoint PATH IMAGE (--points "x,y,label;…" | --box x0,y0,x1,y1 |
//! --mask-input FILE) --out DIR [--embedding FILE] [--model-config FILE]
//! [--multimask auto|multi|single]`: one mask for one set of prompts (any of the three, or
//! several together), written as a mask PNG, an overlay
//! ([`crate::commands::sam2::predict_output`]) and the low-res logits that `--mask-input`
//! takes back ([`crate::commands::sam2::mask_input`]). Coordinates are pixels of IMAGE;
//! labels 1 = positive, 0 = negative click. The prompts are checked against IMAGE before the
//! model runs ([`segburn_train::sam2::user_prompts`] states the rule).
//!
//! PATH is a segburn SAM2 checkpoint (its experiment gives the model) or an official SAM 2 /
//! SAM 2.1 checkpoint used as it is ([`crate::commands::sam2::predict_official`]).

use anyhow::{bail, Context};
use burn::tensor::{backend::Backend, Tensor, TensorData};
use segburn_data::augment::{resize_square, Normaliser};
use segburn_data::decode::{read_image, RgbImage};
use segburn_models::sam2::{upscale_mask_logits, Prompts};
use segburn_train::checkpoint::{load_checkpoint, resolve_checkpoint, Checkpoint, CheckpointError};
use segburn_train::compute_threads::on_compute_pool;
use segburn_train::sam2::embeddings::read_embeddings;
use segburn_train::sam2::interactive::point_prompts;
use segburn_train::sam2::user_prompts::{parse_box, parse_clicks, ImagePrompts};

use crate::commands::sam2::eval::load_model;
use crate::commands::sam2::mask_input::{read_mask_input, write_low_res};
pub use crate::commands::sam2::predict_args::{Multimask, PredictSam2Args};
use crate::commands::sam2::predict_output::{choose_mask, output_stem, write_prediction};
use crate::device::{dispatch, only, BackendJob};
use crate::experiment::sam2::Sam2Experiment;

pub fn run(args: &PredictSam2Args) -> anyhow::Result<()> {
    if args.everything.everything {
        return run_everything(args);
    }
    if args.points.is_none() && args.bbox.is_none() && args.mask_input.is_none() {
        bail!(
            "give a prompt: --points \"x,y,1\", --box x0,y0,x1,y1 and/or --mask-input FILE \
             (the <stem>_low_res.safetensors of an earlier run)"
        );
    }
    let prompts = ImagePrompts {
        clicks: match &args.points {
            Some(text) => parse_clicks(text).context("--points")?,
            None => Vec::new(),
        },
        bbox: args
            .bbox
            .as_deref()
            .map(parse_box)
            .transpose()
            .context("--box")?,
    };
    let args = &PredictSam2Args {
        checkpoint: resolve_checkpoint(&args.checkpoint)?,
        ..args.clone()
    };
    let checkpoint = segburn_checkpoint(&args.checkpoint)?;
    let image = read_image(&args.image)?;
    let (prompts, warnings) = prompts
        .fit_to_image(image.width, image.height)
        .with_context(|| args.image.display().to_string())?;
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    // The model runs on a compute-pool thread, as eval-sam2 and the PIDNet inference modes do
    // (`on_compute_pool`).
    let Some(checkpoint) = checkpoint else {
        let job = Predict {
            experiment: None,
            args,
            image: &image,
            prompts: &prompts,
        };
        return on_compute_pool(|| dispatch(&args.device, CPU_INSTEAD, job));
    };
    if let Some(file) = &args.model_config {
        bail!(
            "--model-config {} is for official-format checkpoints; {} is a segburn checkpoint, \
             whose experiment gives the model",
            file.display(),
            args.checkpoint.display()
        );
    }
    let experiment: Sam2Experiment = ron::de::from_str(&checkpoint.meta.config)
        .with_context(|| format!("{}: not a SAM2 checkpoint", args.checkpoint.display()))?;
    drop(checkpoint);
    let job = Predict {
        experiment: Some(&experiment),
        args,
        image: &image,
        prompts: &prompts,
    };
    on_compute_pool(|| dispatch(&args.device, CPU_INSTEAD, job))
}

const CPU_INSTEAD: &str = "predict on the CPU with --device Cpu";

/// One prediction, on the backend of `--device`.
struct Predict<'a> {
    /// A segburn checkpoint's experiment; `None` for official weights.
    experiment: Option<&'a Sam2Experiment>,
    args: &'a PredictSam2Args,
    image: &'a RgbImage,
    prompts: &'a ImagePrompts,
}

impl BackendJob<()> for Predict<'_> {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<()> {
        let device = only(devices);
        let Predict {
            experiment,
            args,
            image,
            prompts,
        } = self;
        match experiment {
            Some(experiment) => predict_on::<B>(experiment, &device, args, image, prompts),
            None => {
                crate::commands::sam2::predict_official::predict::<B>(args, image, prompts, &device)
            }
        }
    }
}

/// "Segment everything" on the backend of `--device`.
struct Everything<'a> {
    args: &'a PredictSam2Args,
    image: &'a RgbImage,
}

impl BackendJob<()> for Everything<'_> {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<()> {
        let device = only(devices);
        crate::commands::sam2::predict_official::segment_everything::<B>(
            self.args, self.image, &device,
        )
    }
}

fn predict_on<B: Backend>(
    experiment: &Sam2Experiment,
    device: &B::Device,
    args: &PredictSam2Args,
    image: &RgbImage,
    prompts: &ImagePrompts,
) -> anyhow::Result<()> {
    let model = load_model::<B>(&experiment.model, &args.checkpoint, device)?;
    let model = args.precision.apply(model, device)?;
    let dtype = model.sam_prompt_encoder.dtype();
    let (width, height) = (image.width, image.height);
    let size = experiment.model.image_size;
    let features = match (&args.embedding, model.image_encoder.is_some()) {
        (Some(file), _) => {
            let encoder = &model.sam_prompt_encoder;
            read_embeddings(
                std::slice::from_ref(file),
                encoder.embed_dim(),
                encoder.image_embedding_size(),
                model.sam_mask_decoder.conv_s0.is_some(),
                device,
            )?
            .cast(dtype)
        }
        (None, true) => {
            let data = &experiment.data;
            let pixels = resize_square(image, size, &Normaliser::new(data.mean, data.std), false);
            model.forward_image(Tensor::from_data(
                TensorData::new(pixels, [1, 3, size, size]).convert_dtype(dtype),
                (device, dtype),
            ))?
        }
        (None, false) => bail!(
            "{} was trained on cached embeddings (no image encoder): pass --embedding FILE",
            args.checkpoint.display()
        ),
    };
    // Image pixels → model-input pixels (the image is resized to a square).
    let points = prompts.model_points(width, height, size);
    // A mask alone has no points at all (upstream's `points=None`), not an empty point list,
    // which would add a padding token.
    let points = if points.is_empty() {
        None
    } else {
        Some(point_prompts(&[points], device)?)
    };
    let masks = args
        .mask_input
        .as_deref()
        .map(|file| {
            let size = model.sam_prompt_encoder.mask_input_size();
            read_mask_input::<B>(file, size, dtype, device)
        })
        .transpose()?;
    let prompts_in = Prompts {
        points,
        boxes: None,
        masks,
    };
    let input = model.decoder_input(&features, prompts_in)?;
    let output = model
        .sam_mask_decoder
        .forward_inference(input, args.multimask.for_prompts(prompts))?;
    let chosen = choose_mask(
        upscale_mask_logits(output.masks.clone(), [height, width]),
        output.iou_pred,
        output.object_score_logits,
    );
    write_prediction(&args.out, &args.image, image, prompts, &chosen)?;
    let low_res = output.masks.narrow(1, chosen.best, 1).clamp(-32.0, 32.0);
    let path = write_low_res(&args.out, &output_stem(&args.image), low_res)?;
    println!("low-res logits (for --mask-input) {}", path.display());
    Ok(())
}

/// `predict-sam2 --everything`: the automatic mask generator on an official checkpoint.
fn run_everything(args: &PredictSam2Args) -> anyhow::Result<()> {
    if args.points.is_some() || args.bbox.is_some() || args.mask_input.is_some() {
        bail!(
            "--everything makes its own grid of clicks: leave out --points, --box and --mask-input"
        );
    }
    let args = &PredictSam2Args {
        checkpoint: resolve_checkpoint(&args.checkpoint)?,
        ..args.clone()
    };
    // The generator normalises the photo as the official predictor does (ImageNet statistics);
    // a segburn checkpoint's experiment may normalise otherwise, so only official weights run.
    if segburn_checkpoint(&args.checkpoint)?.is_some() {
        bail!(
            "--everything takes an official SAM 2 / SAM 2.1 checkpoint (.pt, or official \
             weights as safetensors); {} is a segburn checkpoint",
            args.checkpoint.display()
        );
    }
    let image = read_image(&args.image)?;
    let job = Everything {
        args,
        image: &image,
    };
    on_compute_pool(|| dispatch(&args.device, CPU_INSTEAD, job))
}

/// The segburn checkpoint at `path`, or `None` for official weights: PyTorch files (`.pt`,
/// `.pth`; segburn writes safetensors only) and safetensors files without segburn's metadata.
/// A segburn checkpoint that fails to load (version, checksum) is an error.
fn segburn_checkpoint(path: &std::path::Path) -> anyhow::Result<Option<Checkpoint>> {
    let pytorch = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("pt") || e.eq_ignore_ascii_case("pth"));
    if pytorch {
        return Ok(None);
    }
    match load_checkpoint(path) {
        Ok(checkpoint) => Ok(Some(checkpoint)),
        Err(CheckpointError::NotACheckpoint { .. }) => Ok(None),
        Err(other) => Err(other.into()),
    }
}

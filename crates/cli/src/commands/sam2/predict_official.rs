//! `predict-sam2` with an official SAM 2 / SAM 2.1 checkpoint (`sam2.1_hiera_tiny.pt`, …) used
//! as it is: the model size is recognised from the file's tensors
//! ([`segburn_models::sam2::official_model`]), the weights load strictly, and the library's
//! [`Sam2ImagePredictor`] does what the official `SAM2ImagePredictor` does: square antialiased
//! resize to 1024², normalisation, encoder + `no_mem_embed`, prompts mapped to the model frame,
//! decoder, masks back at the photo's resolution.
//!
//! A checkpoint of another shape (a modified yaml, the reduced test model) needs its
//! configuration: `--model-config FILE`, a JSON `Sam2Config`.

use std::path::Path;

use anyhow::{bail, Context};
use burn::tensor::backend::Backend;
use segburn_data::decode::RgbImage;
use segburn_models::sam2::import::read_checkpoint;
use segburn_models::sam2::official_model::{image_model_from_checkpoint, size_name};
use segburn_models::sam2::{PromptSet, Sam2, Sam2Config, Sam2ImagePredictor};
use segburn_train::sam2::user_prompts::ImagePrompts;

use crate::commands::sam2::everything;
use crate::commands::sam2::mask_input::{read_mask_input, write_low_res};
use crate::commands::sam2::predict_args::PredictSam2Args;
use crate::commands::sam2::predict_output::{choose_mask, output_stem, write_prediction};

/// Reads a `--model-config` file: a JSON [`Sam2Config`], checked.
pub fn read_model_config(path: &Path) -> anyhow::Result<Sam2Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --model-config {}", path.display()))?;
    let config: Sam2Config = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--model-config {}: not a SAM2 model configuration (a JSON Sam2Config, as Burn's \
             Config::save writes it): {e}",
            path.display()
        )
    })?;
    config
        .check()
        .with_context(|| format!("--model-config {}", path.display()))?;
    Ok(config)
}

/// The prompts as the library predictor takes them (one object).
pub fn prompt_set(prompts: &ImagePrompts) -> PromptSet {
    PromptSet {
        points: prompts.clicks.iter().map(|c| [c.x, c.y]).collect(),
        labels: prompts.clicks.iter().map(|c| i64::from(c.label)).collect(),
        bbox: prompts.bbox,
    }
}

/// Loads the official checkpoint `args.checkpoint` (with `--model-config` where given) and
/// says which model it is.
fn load_official_model<B: Backend>(
    args: &PredictSam2Args,
    device: &B::Device,
) -> anyhow::Result<Sam2<B>> {
    let path = &args.checkpoint;
    if let Some(file) = &args.embedding {
        bail!(
            "--embedding {}: {} is an official checkpoint with its image encoder; cached \
             embeddings are for checkpoints trained without one",
            file.display(),
            path.display()
        );
    }
    let config = args
        .model_config
        .as_deref()
        .map(read_model_config)
        .transpose()?;
    let name = path.display().to_string();
    let tensors = read_checkpoint(path)?;
    let loaded = image_model_from_checkpoint::<B>(&tensors, config, &name, device).map_err(
        |e| match args.model_config {
            None => anyhow::anyhow!(
                "{e}. For a model of another configuration, give that configuration with \
                 --model-config FILE (a JSON Sam2Config)"
            ),
            Some(_) => anyhow::Error::new(e),
        },
    )?;
    drop(tensors);
    let model_name = match loaded.size {
        Some(size) => format!("SAM 2.1 Hiera-{}", size_name(size).to_ascii_uppercase()),
        None => "the model of --model-config".to_string(),
    };
    println!(
        "{name}: {model_name}, {} tensors loaded; video-memory tensors not used: {}",
        loaded.report.loaded.len(),
        loaded.report.not_used.len()
    );
    args.precision.apply(loaded.model, device)
}

/// Loads the official checkpoint `args.checkpoint`, predicts the mask of `prompts` on `image`
/// and writes it.
pub fn predict<B: Backend>(
    args: &PredictSam2Args,
    image: &RgbImage,
    prompts: &ImagePrompts,
    device: &B::Device,
) -> anyhow::Result<()> {
    let model = load_official_model::<B>(args, device)?;
    let predictor =
        Sam2ImagePredictor::set_image(&model, &image.pixels, [image.height, image.width], device)?;
    let mask_input = args
        .mask_input
        .as_deref()
        .map(|file| {
            let encoder = &model.sam_prompt_encoder;
            read_mask_input::<B>(file, encoder.mask_input_size(), encoder.dtype(), device)
        })
        .transpose()?;
    let prediction = predictor.predict(
        &[prompt_set(prompts)],
        mask_input,
        args.multimask.for_prompts(prompts),
    )?;
    let chosen = choose_mask(
        prediction.masks,
        prediction.iou_pred,
        prediction.object_score_logits,
    );
    write_prediction(&args.out, &args.image, image, prompts, &chosen)?;
    let low_res = prediction.low_res_masks.narrow(1, chosen.best, 1);
    let path = write_low_res(&args.out, &output_stem(&args.image), low_res)?;
    println!("low-res logits (for --mask-input) {}", path.display());
    Ok(())
}

/// Loads the official checkpoint `args.checkpoint` and segments everything in `image` with
/// the generator of `args.everything`, writing its files into `args.out`.
pub fn segment_everything<B: Backend>(
    args: &PredictSam2Args,
    image: &RgbImage,
    device: &B::Device,
) -> anyhow::Result<()> {
    let model = load_official_model::<B>(args, device)?;
    everything::segment_everything(
        &model,
        &args.everything,
        image,
        &args.image,
        &args.out,
        device,
    )
}

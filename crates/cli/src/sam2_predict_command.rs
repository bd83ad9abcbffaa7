//! `predict-sam2 --checkpoint PATH IMAGE (--points "x,y,label;…" | --box x0,y0,x1,y1)
//! --out DIR [--embedding FILE]`: one mask for one set of prompts, written as a mask PNG and an
//! overlay. Coordinates are pixels of IMAGE; labels 1 = positive, 0 = negative click. The
//! prompts are checked against IMAGE before the model runs
//! ([`segburn_train::sam::user_prompts`] states the rule).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use burn::backend::Flex;
use burn::tensor::{backend::Backend, Tensor, TensorData};
use segburn_data::augment::{resize_square, Normaliser};
use segburn_data::decode::{read_image, RgbImage};
use segburn_models::sam2::{upscale_mask_logits, Prompts};
use segburn_train::checkpoint::{load_checkpoint, resolve_checkpoint};
use segburn_train::sam::embeddings::read_embeddings;
use segburn_train::sam::interactive::point_prompts;
use segburn_train::sam::prompts::{Click, POSITIVE};
use segburn_train::sam::user_prompts::{parse_box, parse_clicks, ImagePrompts};

use crate::pictures::{blend, file_stem};
use crate::sam2_eval_command::load_model;
use crate::sam2_experiment::Sam2Experiment;

/// Parsed `predict-sam2` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "predict-sam2",
    about = "Segment the object a set of prompts points at: writes <stem>_mask.png and <stem>_overlay.png"
)]
pub struct PredictSam2Args {
    /// A segburn SAM2 checkpoint (its embedded experiment gives the model size), a run
    /// directory (its newest checkpoint), or a run's checkpoints/latest or checkpoints/best.
    #[arg(long, value_name = "PATH")]
    pub checkpoint: PathBuf,
    /// The image (PNG or JPEG).
    pub image: PathBuf,
    /// Clicks `x,y,label` separated by `;` (label 1 positive, 0 negative), in image pixels.
    #[arg(long, value_name = "X,Y,LABEL;…", allow_hyphen_values = true)]
    pub points: Option<String>,
    /// A box `x0,y0,x1,y1` in image pixels.
    #[arg(long = "box", value_name = "X0,Y0,X1,Y1", allow_hyphen_values = true)]
    pub bbox: Option<String>,
    /// Where the mask and the overlay go.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A cached embedding of IMAGE, for checkpoints trained without an image encoder.
    #[arg(long, value_name = "FILE")]
    pub embedding: Option<PathBuf>,
}

pub fn run(args: &PredictSam2Args) -> anyhow::Result<()> {
    if args.points.is_none() && args.bbox.is_none() {
        bail!("give a prompt: --points \"x,y,1\" and/or --box x0,y0,x1,y1");
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
    let checkpoint = load_checkpoint(&args.checkpoint).with_context(|| {
        "predict-sam2 needs a segburn SAM2 checkpoint (its experiment says the model's size)"
    })?;
    let experiment: Sam2Experiment = ron::de::from_str(&checkpoint.meta.config)
        .with_context(|| format!("{}: not a SAM2 checkpoint", args.checkpoint.display()))?;
    let image = read_image(&args.image)?;
    let (prompts, warnings) = prompts
        .fit_to_image(image.width, image.height)
        .with_context(|| args.image.display().to_string())?;
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    predict_on::<Flex>(&experiment, &Default::default(), args, &image, &prompts)
}

fn predict_on<B: Backend>(
    experiment: &Sam2Experiment,
    device: &B::Device,
    args: &PredictSam2Args,
    image: &RgbImage,
    prompts: &ImagePrompts,
) -> anyhow::Result<()> {
    let model = load_model::<B>(&experiment.model, &args.checkpoint, device)?;
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
        }
        (None, true) => {
            let data = &experiment.data;
            let pixels = resize_square(image, size, &Normaliser::new(data.mean, data.std), false);
            model.forward_image(Tensor::from_data(
                TensorData::new(pixels, [1, 3, size, size]),
                device,
            ))?
        }
        (None, false) => bail!(
            "{} was trained on cached embeddings (no image encoder): pass --embedding FILE",
            args.checkpoint.display()
        ),
    };
    // Image pixels → model-input pixels (the image is resized to a square).
    let points = prompts.model_points(width, height, size);
    let count = points.len();
    let prompts_in = Prompts {
        points: Some(point_prompts(&[points], device)?),
        ..Prompts::default()
    };
    let input = model.decoder_input(&features, prompts_in)?;
    let output = model
        .sam_mask_decoder
        .forward_inference(input, count <= 1)?;
    let ious: Vec<f32> = output.iou_pred.clone().into_data().iter::<f32>().collect();
    let best = ious
        .iter()
        .enumerate()
        .fold(0, |b, (i, v)| if *v > ious[b] { i } else { b });
    let object: f32 = output
        .object_score_logits
        .into_data()
        .iter::<f32>()
        .next()
        .unwrap_or(0.0);
    let masks = output.masks.narrow(1, best, 1);
    let mask: Vec<u8> = upscale_mask_logits(masks, [height, width])
        .into_data()
        .iter::<f32>()
        .map(|v| if v > 0.0 { 255 } else { 0 })
        .collect();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let stem = file_stem(
        &args
            .image
            .file_stem()
            .map_or("image".into(), |s| s.to_string_lossy().into_owned()),
    );
    let mask_path = args.out.join(format!("{stem}_mask.png"));
    let overlay_path = args.out.join(format!("{stem}_overlay.png"));
    save_png(
        &mask_path,
        width,
        height,
        image::ExtendedColorType::L8,
        &mask,
    )?;
    let tint: Vec<u8> = mask
        .iter()
        .flat_map(|&m| if m > 0 { [255, 40, 40] } else { [0, 0, 0] })
        .collect();
    let mut overlay: Vec<u8> = blend(&image.pixels, &tint, 0.5)
        .into_iter()
        .zip(mask.iter().flat_map(|&m| [m, m, m]))
        .zip(&image.pixels)
        .map(|((blended, m), &original)| if m > 0 { blended } else { original })
        .collect();
    draw_prompts(&mut overlay, width, height, prompts);
    save_png(
        &overlay_path,
        width,
        height,
        image::ExtendedColorType::Rgb8,
        &overlay,
    )?;
    let area = mask.iter().filter(|&&m| m > 0).count();
    println!(
        "mask {} ({} px, {:.1} % of the image), predicted IoU {:.3}, object score {:.2}{}\noverlay {}",
        mask_path.display(),
        area,
        100.0 * area as f64 / (width * height) as f64,
        ious[best],
        object,
        if object <= 0.0 { " (≤ 0: the model thinks no object is there)" } else { "" },
        overlay_path.display()
    );
    Ok(())
}

/// Green crosses for positive clicks, blue for negative ones, a yellow box outline.
fn draw_prompts(rgb: &mut [u8], width: usize, height: usize, prompts: &ImagePrompts) {
    let mut put = |x: i64, y: i64, colour: [u8; 3]| {
        if (0..width as i64).contains(&x) && (0..height as i64).contains(&y) {
            let at = 3 * (y as usize * width + x as usize);
            rgb[at..at + 3].copy_from_slice(&colour);
        }
    };
    for &Click { x, y, label } in &prompts.clicks {
        let colour = if label == POSITIVE {
            [40, 220, 40]
        } else {
            [40, 80, 255]
        };
        let (x, y) = (x.round() as i64, y.round() as i64);
        for d in -4..=4 {
            put(x + d, y, colour);
            put(x, y + d, colour);
        }
    }
    if let Some([x0, y0, x1, y1]) = prompts.bbox {
        let (x0, y0, x1, y1) = (x0 as i64, y0 as i64, x1 as i64, y1 as i64);
        for x in x0..=x1 {
            put(x, y0, [255, 220, 0]);
            put(x, y1, [255, 220, 0]);
        }
        for y in y0..=y1 {
            put(x0, y, [255, 220, 0]);
            put(x1, y, [255, 220, 0]);
        }
    }
}

fn save_png(
    path: &Path,
    width: usize,
    height: usize,
    colour: image::ExtendedColorType,
    data: &[u8],
) -> anyhow::Result<()> {
    image::save_buffer_with_format(
        path,
        data,
        width as u32,
        height as u32,
        colour,
        image::ImageFormat::Png,
    )
    .with_context(|| format!("cannot write {}", path.display()))
}

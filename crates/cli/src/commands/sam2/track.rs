//! `track-sam2 --checkpoint PATH --frames DIR --prompt FRAME:OBJECT:… --out DIR`: the official
//! SAM 2.1 video predictor on a folder of frames ([`segburn_models::sam2::video_predictor`]).
//! Frames are decoded and resized on threads (Pillow's bicubic resize, bit for bit, as the
//! official loader does), kept as 8-bit pixels and normalised when the model reads them.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use burn::tensor::{backend::Backend, DType, Tensor, TensorData};
use segburn_data::decode::{read_image_with, Orientation};
use segburn_data::vos::read_annotation;
use segburn_data::{resize_rgb8, PillowFilter};
use segburn_models::sam2::import::read_checkpoint;
use segburn_models::sam2::official_model::{size_name, video_model_from_checkpoint};
use segburn_models::sam2::video_predictor::{
    FrameMasks, FrameSource, ObjectPrompt, Sam2VideoPredictor, VideoPredictorConfig,
};
use segburn_models::sam2::{Sam2Config, Sam2Error};
use segburn_train::compute_threads::on_compute_pool;

use crate::commands::sam2::predict_args::InferencePrecision;
use crate::commands::sam2::predict_official::read_model_config;
pub use crate::commands::sam2::track_args::{
    parse_prompt, Direction, PromptValue, TrackPrompt, TrackSam2Args,
};
use crate::commands::sam2::track_output::{object_ids, write_overlay, write_palette_png};
use crate::device::{dispatch, only, BackendJob};
use crate::output::pictures::file_stem;

const CPU_INSTEAD: &str = "track on the CPU with --device Cpu";
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

pub fn run(args: &TrackSam2Args) -> anyhow::Result<()> {
    let prompts: Vec<TrackPrompt> = args
        .prompts
        .iter()
        .map(|p| parse_prompt(p))
        .collect::<anyhow::Result<_>>()?;
    if prompts.is_empty() && args.first_masks.is_none() {
        bail!("give a prompt: --prompt FRAME:OBJECT:points=x,y,1 (or box=…, mask=FILE), or --first-masks FILE");
    }
    let frames = list_frames(&args.frames)?;
    if let Some(prompt) = prompts.iter().find(|p| p.frame >= frames.len()) {
        bail!(
            "--prompt on frame {}: {} has {} frames (0 to {})",
            prompt.frame,
            args.frames.display(),
            frames.len(),
            frames.len() - 1
        );
    }
    on_compute_pool(|| {
        dispatch(
            &args.device,
            CPU_INSTEAD,
            Track {
                args,
                frames: &frames,
                prompts: &prompts,
            },
        )
    })
}

/// The frame files of `dir`: JPEG or PNG, by number when every stem is one, else by name.
pub fn list_frames(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the frame folder {}", dir.display()))?;
    let mut frames = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot read the frame folder {}", dir.display()))?
            .path();
        let is_image = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| ["jpg", "jpeg", "png"].contains(&e.to_ascii_lowercase().as_str()));
        if is_image && path.is_file() {
            frames.push(path);
        }
    }
    if frames.is_empty() {
        bail!("{} has no JPEG or PNG frames", dir.display());
    }
    let number = |p: &PathBuf| {
        p.file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok())
    };
    if frames.iter().all(|p| number(p).is_some()) {
        frames.sort_by_key(|p| number(p));
    } else {
        frames.sort();
    }
    Ok(frames)
}

/// One decoded frame: its size and its pixels resized to the model's input.
pub(crate) struct Frame {
    pub size: [usize; 2],
    resized: Vec<u8>,
}

/// Decodes and resizes every frame on `threads` threads (Pillow's `open(…).convert("RGB")
/// .resize((S, S))`: EXIF orientation ignored, bicubic).
pub(crate) fn decode_frames(
    paths: &[PathBuf],
    [s_h, s_w]: [usize; 2],
    threads: usize,
) -> anyhow::Result<Vec<Frame>> {
    let threads = threads.clamp(1, paths.len());
    let decode = |path: &PathBuf| -> anyhow::Result<Frame> {
        let image = read_image_with(path, Orientation::AsStored)?;
        let size = [image.height, image.width];
        let resized = resize_rgb8(&image.pixels, size, [s_h, s_w], PillowFilter::Bicubic)
            .with_context(|| path.display().to_string())?;
        Ok(Frame { size, resized })
    };
    let mut slots: Vec<Option<anyhow::Result<Frame>>> = paths.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                let decode = &decode;
                scope.spawn(move || {
                    (worker..paths.len())
                        .step_by(threads)
                        .map(|i| (i, decode(&paths[i])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for worker in workers {
            for (i, frame) in worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            {
                slots[i] = Some(frame);
            }
        }
    });
    let frames: Vec<Frame> = slots
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Err(anyhow::anyhow!("a frame was not decoded"))))
        .collect::<anyhow::Result<_>>()?;
    if let Some((i, frame)) = frames
        .iter()
        .enumerate()
        .find(|(_, f)| f.size != frames[0].size)
    {
        bail!(
            "{} is {}×{}, but {} is {}×{}: a video's frames share one size",
            paths[i].display(),
            frame.size[1],
            frame.size[0],
            paths[0].display(),
            frames[0].size[1],
            frames[0].size[0]
        );
    }
    Ok(frames)
}

/// The frames as the model reads them, normalised on demand from their 8-bit pixels.
pub(crate) struct ResizedFrames<B: Backend> {
    frames: Vec<Frame>,
    size: [usize; 2],
    device: B::Device,
    dtype: DType,
}

impl<B: Backend> ResizedFrames<B> {
    /// `frames` resized to `size`, read on `device` in `dtype`.
    pub(crate) fn new(
        frames: Vec<Frame>,
        size: [usize; 2],
        device: B::Device,
        dtype: DType,
    ) -> Self {
        Self {
            frames,
            size,
            device,
            dtype,
        }
    }
}

impl<B: Backend> FrameSource<B> for ResizedFrames<B> {
    fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// As the official loader in f32: `(f32(q / 255) − mean) / std`, planar.
    fn frame(&self, index: usize) -> Result<Tensor<B, 4>, Sam2Error> {
        let frame = self
            .frames
            .get(index)
            .ok_or_else(|| Sam2Error::Prompt(format!("frame {index}")))?;
        let [h, w] = self.size;
        let mut planes = vec![0f32; 3 * h * w];
        for (pixel, rgb) in frame.resized.chunks_exact(3).enumerate() {
            for c in 0..3 {
                let v = (f64::from(rgb[c]) / 255.0) as f32;
                planes[c * h * w + pixel] = (v - MEAN[c]) / STD[c];
            }
        }
        let data = TensorData::new(planes, [1, 3, h, w]);
        Ok(Tensor::<B, 4>::from_data(data, &self.device).cast(self.dtype))
    }
}

/// The tracking run on the backend of `--device`.
struct Track<'a> {
    args: &'a TrackSam2Args,
    frames: &'a [PathBuf],
    prompts: &'a [TrackPrompt],
}

impl BackendJob<()> for Track<'_> {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<()> {
        let device = only(devices);
        track::<B>(self.args, self.frames, self.prompts, &device)
    }
}

/// An official SAM 2.1 checkpoint (or one of `model_config`'s shape) with its video memory,
/// in `precision`; says which model it is.
pub(crate) fn load_video_model<B: Backend>(
    checkpoint: &Path,
    model_config: Option<&Path>,
    precision: InferencePrecision,
    device: &B::Device,
) -> anyhow::Result<(segburn_models::sam2::Sam2<B>, Sam2Config)> {
    let config = model_config.map(read_model_config).transpose()?;
    let name = checkpoint.display().to_string();
    let tensors = read_checkpoint(checkpoint)?;
    let loaded = video_model_from_checkpoint::<B>(&tensors, config, &name, device)?;
    drop(tensors);
    let model_name = match loaded.size {
        Some(size) => format!("SAM 2.1 Hiera-{}", size_name(size).to_ascii_uppercase()),
        None => "the model of --model-config".to_string(),
    };
    println!(
        "{name}: {model_name} with its video memory, {} tensors loaded",
        loaded.report.loaded.len()
    );
    Ok((precision.apply(loaded.model, device)?, loaded.config))
}

fn track<B: Backend>(
    args: &TrackSam2Args,
    paths: &[PathBuf],
    prompts: &[TrackPrompt],
    device: &B::Device,
) -> anyhow::Result<()> {
    let (model, config) = load_video_model::<B>(
        &args.checkpoint,
        args.model_config.as_deref(),
        args.precision,
        device,
    )?;
    let size = config.prompt_encoder.input_image_size;
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let frames = decode_frames(paths, size, threads)?;
    let video_size = frames[0].size;
    let decode_seconds = started.elapsed().as_secs_f64();
    let source = ResizedFrames::<B>::new(frames, size, device.clone(), args.precision.dtype());
    let settings = VideoPredictorConfig::new().with_fill_hole_area(args.fill_holes);
    let mut predictor = Sam2VideoPredictor::new(&model, &config, settings, source, video_size)?;
    for prompt in prompts {
        let request = match &prompt.value {
            PromptValue::Clicks(clicks) => ObjectPrompt::clicks(
                clicks.iter().map(|&(x, y, _)| [x, y]).collect(),
                clicks.iter().map(|&(_, _, l)| l).collect(),
            ),
            PromptValue::Box(b) => ObjectPrompt::bounding_box(*b),
            PromptValue::Mask(path) => mask_prompt(path)?,
        };
        predictor
            .add_prompt(prompt.frame, prompt.object, request)
            .with_context(|| {
                format!(
                    "prompt on frame {} for object {}",
                    prompt.frame, prompt.object
                )
            })?;
    }
    if let Some(path) = &args.first_masks {
        let annotation = read_annotation(path)?;
        let ids = annotation.object_ids();
        if ids.is_empty() {
            bail!(
                "--first-masks {}: no object id in it (only 0 and 255)",
                path.display()
            );
        }
        for id in ids {
            let mask = annotation.ids.iter().map(|&v| u32::from(v) == id).collect();
            let prompt = ObjectPrompt::Mask {
                mask,
                size: [annotation.height, annotation.width],
            };
            predictor
                .add_prompt(0, id, prompt)
                .with_context(|| format!("--first-masks {}", path.display()))?;
        }
    }
    let masks_dir = args.out.join("masks");
    let overlays_dir = args.out.join("overlays");
    for dir in [&masks_dir, &overlays_dir]
        .into_iter()
        .take(if args.no_overlays { 1 } else { 2 })
    {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut written = vec![false; paths.len()];
    let mut write = |masks: FrameMasks<B>| -> Result<(), Sam2Error> {
        if std::mem::replace(&mut written[masks.frame], true) {
            return Ok(()); // the start frame comes again in the backward pass
        }
        write_frame(
            args,
            &paths[masks.frame],
            &masks,
            video_size,
            &masks_dir,
            &overlays_dir,
        )
        .map_err(|e| Sam2Error::Config(format!("{e:#}")))
    };
    let tracking = Instant::now();
    let (start, max) = (args.start, args.max_frames);
    if matches!(args.direction, Direction::Forward | Direction::Both) {
        predictor.propagate_with(start, max, false, &mut write)?;
    }
    if matches!(args.direction, Direction::Backward | Direction::Both) {
        predictor.propagate_with(start, max, true, &mut write)?;
    }
    let seconds = tracking.elapsed().as_secs_f64();
    let count = written.iter().filter(|&&w| w).count();
    let ids = predictor.object_ids();
    let summary = serde_json::json!({
        "frames": paths.len(),
        "frames_tracked": count,
        "objects": ids,
        "video_size": [video_size[0], video_size[1]],
        "decode_seconds": decode_seconds,
        "tracking_seconds": seconds,
        "frames_per_second": count as f64 / seconds.max(1e-9),
    });
    let summary_path = args.out.join("tracking.json");
    std::fs::write(&summary_path, serde_json::to_string_pretty(&summary)?)
        .with_context(|| format!("cannot write {}", summary_path.display()))?;
    println!(
        "{count} frames, objects {ids:?}: {:.2} frames/s ({seconds:.1} s; decoding {decode_seconds:.1} s) -> {}",
        count as f64 / seconds.max(1e-9),
        masks_dir.display()
    );
    Ok(())
}

/// A mask file as a prompt: non-zero pixels are inside.
fn mask_prompt(path: &Path) -> anyhow::Result<ObjectPrompt> {
    let annotation =
        read_annotation(path).with_context(|| format!("mask prompt {}", path.display()))?;
    Ok(ObjectPrompt::Mask {
        mask: annotation.ids.iter().map(|&v| v != 0).collect(),
        size: [annotation.height, annotation.width],
    })
}

fn write_frame<B: Backend>(
    args: &TrackSam2Args,
    path: &Path,
    masks: &FrameMasks<B>,
    [h, w]: [usize; 2],
    masks_dir: &Path,
    overlays_dir: &Path,
) -> anyhow::Result<()> {
    let values: Vec<f32> = masks
        .logits
        .clone()
        .into_data()
        .convert::<f32>()
        .to_vec()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let logits: Vec<Vec<f32>> = values.chunks(h * w).map(<[f32]>::to_vec).collect();
    let ids = object_ids(&logits, &masks.object_ids);
    let stem = file_stem(
        &path
            .file_stem()
            .map_or("frame".into(), |s| s.to_string_lossy().into_owned()),
    );
    write_palette_png(&masks_dir.join(format!("{stem}.png")), &ids, [h, w])?;
    if !args.no_overlays {
        let image = read_image_with(path, Orientation::AsStored)?;
        write_overlay(
            &overlays_dir.join(format!("{stem}.png")),
            &image.pixels,
            &ids,
            [h, w],
        )?;
    }
    Ok(())
}

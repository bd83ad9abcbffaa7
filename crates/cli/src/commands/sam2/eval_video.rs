//! `eval-sam2 --video ROOT --checkpoint PATH [--split NAME] [--out DIR] [--json FILE]`: the
//! semi-supervised VOS protocol of DAVIS 2017 with the SAM 2.1 video predictor. Each object of
//! a video's first annotated frame is prompted with its mask there, the objects are tracked
//! forward, each pixel goes to the object of the highest positive logit, and J&F is computed
//! over the annotated frames as the official evaluation does ([`segburn_train::metric::vos`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use burn::tensor::backend::Backend;
use segburn_data::vos::{read_annotation, VosIndex, VosLayout, VosVideo};
use segburn_models::sam2::video_predictor::{
    ObjectPrompt, Sam2VideoPredictor, VideoPredictorConfig,
};
use segburn_models::sam2::{Sam2, Sam2Config};
use segburn_train::compute_threads::on_compute_pool;
use segburn_train::metric::vos::{DavisEvaluation, DavisSummary, LabelMap};

use crate::commands::sam2::eval::EvalSam2Args;
use crate::commands::sam2::predict_args::InferencePrecision;
use crate::commands::sam2::track::{decode_frames, load_video_model, ResizedFrames};
use crate::commands::sam2::track_output::{object_ids, write_palette_png};
use crate::device::{dispatch, only, BackendJob};

/// Runs the video evaluation of `args` on the VOS dataset at `root`.
pub fn run(args: &EvalSam2Args, root: &Path) -> anyhow::Result<()> {
    let index = VosIndex::new(&layout_of(root), args.split.as_deref())?;
    if index.is_empty() {
        bail!("{}: no video to evaluate", root.display());
    }
    let device = args.device.clone().unwrap_or_default();
    on_compute_pool(|| {
        dispatch(
            &device,
            "evaluate on the CPU with --device Cpu",
            VideoEval {
                args,
                index: &index,
            },
        )
    })
}

/// The dataset's layout: `JPEGImages/` and `Annotations/`, or DAVIS 2017's own
/// `JPEGImages/480p/` and `Annotations/480p/` when the folder has them.
fn layout_of(root: &Path) -> VosLayout {
    let mut layout = VosLayout::new(root);
    let davis = |folder: &str| PathBuf::from(folder).join("480p");
    if root.join(davis("JPEGImages")).is_dir() && root.join(davis("Annotations")).is_dir() {
        layout.images = davis("JPEGImages");
        layout.annotations = davis("Annotations");
    }
    layout
}

struct VideoEval<'a> {
    args: &'a EvalSam2Args,
    index: &'a VosIndex,
}

impl BackendJob<()> for VideoEval<'_> {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<()> {
        let device = only(devices);
        let args = self.args;
        let (model, config) = load_video_model::<B>(
            &args.checkpoint,
            args.model_config.as_deref(),
            InferencePrecision::F32,
            &device,
        )?;
        let mut evaluation = DavisEvaluation::new();
        let mut sequences = Vec::new();
        for video in self.index.videos() {
            let (annotations, predictions) =
                track_video(&model, &config, video, args.out.as_deref(), &device)
                    .with_context(|| format!("video {}", video.name))?;
            let results = evaluation.add_sequence(&video.name, &annotations, &predictions)?;
            for object in results {
                println!(
                    "{} object {}: J {:.4}  F {:.4}",
                    object.sequence, object.object, object.j_stats.mean, object.f_stats.mean
                );
            }
            sequences.push(video.name.clone());
        }
        let summary = evaluation.summary()?;
        print_summary(&summary, sequences.len());
        if let Some(path) = &args.json {
            write_json(path, &summary, &evaluation, &sequences)?;
        }
        Ok(())
    }
}

/// One video: its annotations and the predicted label maps of its annotated frames (from the
/// first annotated one on), optionally written to `<out>/<video>/<frame>.png`.
fn track_video<B: Backend>(
    model: &Sam2<B>,
    config: &Sam2Config,
    video: &VosVideo,
    out: Option<&Path>,
    device: &B::Device,
) -> anyhow::Result<(Vec<LabelMap>, Vec<LabelMap>)> {
    let first = video.first_annotated;
    let paths: Vec<PathBuf> = video.frames.iter().map(|f| f.image.clone()).collect();
    let size = config.prompt_encoder.input_image_size;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let frames = decode_frames(&paths, size, threads)?;
    let video_size = frames[0].size;
    let source = ResizedFrames::<B>::new(frames, size, device.clone(), burn::tensor::DType::F32);
    let mut predictor = Sam2VideoPredictor::new(
        model,
        config,
        VideoPredictorConfig::new(),
        source,
        video_size,
    )?;
    let annotation_path = video.frames[first]
        .annotation
        .as_ref()
        .context("the first annotated frame")?;
    let first_annotation = read_annotation(annotation_path)?;
    for id in first_annotation.object_ids() {
        let mask = first_annotation
            .ids
            .iter()
            .map(|&v| u32::from(v) == id)
            .collect();
        let size = [first_annotation.height, first_annotation.width];
        predictor.add_prompt(first, id, ObjectPrompt::Mask { mask, size })?;
    }
    let [h, w] = video_size;
    let mut predicted: Vec<Option<Vec<u8>>> = vec![None; paths.len()];
    predictor.propagate_with(Some(first), None, false, |masks| {
        let values: Vec<f32> = masks
            .logits
            .into_data()
            .convert::<f32>()
            .to_vec()
            .unwrap_or_default();
        let logits: Vec<Vec<f32>> = values.chunks(h * w).map(<[f32]>::to_vec).collect();
        predicted[masks.frame] = Some(object_ids(&logits, &masks.object_ids));
        Ok(())
    })?;
    let mut annotations = Vec::new();
    let mut predictions = Vec::new();
    for (position, frame) in video.frames.iter().enumerate().skip(first) {
        let ids = predicted[position]
            .clone()
            .unwrap_or_else(|| vec![0; h * w]);
        if let Some(dir) = out {
            let dir = dir.join(&video.name);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            write_palette_png(&dir.join(format!("{}.png", frame.name)), &ids, video_size)?;
        }
        let Some(path) = &frame.annotation else {
            continue;
        };
        let annotation = read_annotation(path)?;
        annotations.push(LabelMap::new(
            annotation.height,
            annotation.width,
            annotation.ids,
        )?);
        predictions.push(LabelMap::new(h, w, ids)?);
    }
    Ok((annotations, predictions))
}

fn print_summary(summary: &DavisSummary, videos: usize) {
    println!(
        "J&F {:.4}  J mean {:.4} recall {:.4} decay {:.4}  F mean {:.4} recall {:.4} decay {:.4}  ({} objects in {videos} videos)",
        summary.jf_mean, summary.j.mean, summary.j.recall, summary.j.decay, summary.f.mean, summary.f.recall, summary.f.decay, summary.objects
    );
}

fn write_json(
    path: &Path,
    summary: &DavisSummary,
    evaluation: &DavisEvaluation,
    sequences: &[String],
) -> anyhow::Result<()> {
    let stats = |s: &segburn_train::metric::vos::VosStatistics| serde_json::json!({"mean": s.mean, "recall": s.recall, "decay": s.decay});
    let objects: Vec<serde_json::Value> = evaluation
        .objects()
        .iter()
        .map(|o| serde_json::json!({"sequence": o.sequence, "object": o.object, "j": stats(&o.j_stats), "f": stats(&o.f_stats)}))
        .collect();
    let report = serde_json::json!({
        "jf_mean": summary.jf_mean,
        "j": stats(&summary.j),
        "f": stats(&summary.f),
        "objects": objects,
        "sequences": sequences,
    });
    std::fs::write(path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

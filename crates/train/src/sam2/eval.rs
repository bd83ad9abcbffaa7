//! Interactive-segmentation evaluation: mean mask IoU over every object of a split after one
//! click, after one box, and after each of `k` correction clicks that follow the first click.
//! The prompts are deterministic (centre clicks, tight boxes), so two evaluations of the same
//! model agree exactly.

use std::fmt;

use burn::tensor::backend::Backend;
use burn::tensor::FloatDType;
use segburn_data::objects::ObjectDataset;
use segburn_models::sam2::Sam2;
use serde::{Deserialize, Serialize};

use super::batch::{image_features, per_object, truth_views};
use super::interactive::{interactive_steps, mask_iou, EvalPrompts, EvalStart};
use crate::engine::TrainError;

/// Mean IoUs over the evaluated objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sam2EvalReport {
    pub images: usize,
    pub objects: usize,
    /// One centre click (best of the three multimask outputs by predicted IoU, as SAM2's
    /// predictor picks).
    pub one_click: f64,
    /// The tight box.
    pub one_box: f64,
    /// After 1, 2, … correction clicks following the first click.
    pub after_corrections: Vec<f64>,
}

impl Sam2EvalReport {
    /// The number a run tracks as its best: the IoU after the last correction (or one click).
    pub fn headline(&self) -> f64 {
        self.after_corrections
            .last()
            .copied()
            .unwrap_or(self.one_click)
    }
}

impl fmt::Display for Sam2EvalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "mean mask IoU over {} objects in {} images:",
            self.objects, self.images
        )?;
        writeln!(f, "  1 click  {:.4}", self.one_click)?;
        write!(f, "  1 box    {:.4}", self.one_box)?;
        for (k, iou) in self.after_corrections.iter().enumerate() {
            write!(f, "\n  1 click + {} correction(s)  {iou:.4}", k + 1)?;
        }
        Ok(())
    }
}

/// Evaluates `model` (use the inner backend: no gradients) on every image of `dataset`.
pub fn evaluate<B: Backend>(
    model: &Sam2<B>,
    dataset: &ObjectDataset,
    corrections: usize,
    gate_by_object_score: bool,
    device: &B::Device,
) -> Result<Sam2EvalReport, TrainError> {
    let mut sums = vec![0.0f64; corrections + 2];
    let mut objects = 0usize;
    for index in 0..dataset.len() {
        let batch = dataset.eval_batch(index)?;
        if batch.num_objects() == 0 {
            continue;
        }
        let features = image_features(
            model,
            &batch,
            &|images| model.forward_image(images),
            FloatDType::F32,
            device,
        )?;
        let features = per_object(&features, &batch.object_image);
        let truths = truth_views(&batch);
        let area = batch.size * batch.size;
        let mut add = |slot: usize, binary: &[u8]| {
            for (truth, predicted) in batch
                .masks
                .chunks_exact(area)
                .zip(binary.chunks_exact(area))
            {
                sums[slot] += mask_iou(truth, predicted);
            }
        };
        let clicks = interactive_steps(
            model,
            &features,
            &truths,
            &mut EvalPrompts(EvalStart::Click),
            corrections,
            gate_by_object_score,
        )?;
        for (step, binary) in clicks.binary.iter().enumerate() {
            add(if step == 0 { 0 } else { step + 1 }, binary);
        }
        let boxes = interactive_steps(
            model,
            &features,
            &truths,
            &mut EvalPrompts(EvalStart::Box),
            0,
            gate_by_object_score,
        )?;
        add(1, &boxes.binary[0]);
        objects += batch.num_objects();
    }
    let mean = |sum: f64| {
        if objects == 0 {
            0.0
        } else {
            sum / objects as f64
        }
    };
    Ok(Sam2EvalReport {
        images: dataset.len(),
        objects,
        one_click: mean(sums[0]),
        one_box: mean(sums[1]),
        after_corrections: sums[2..].iter().map(|&s| mean(s)).collect(),
    })
}

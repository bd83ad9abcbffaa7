//! Prompt simulation as in SAM2 training (`training/model/sam2.py`, `sam2_utils.py`).
//!
//! Per batch the first prompt is, for every object alike, a noisy box (probability
//! [`PromptConfig::prob_box`]) or one positive click uniformly inside the object, or, with
//! probability [`PromptConfig::prob_mask`] (0 by default), the object's ground-truth mask alone
//! as the mask prompt. Then each correction step adds one click per object, uniformly over its
//! error region: a false negative
//! pixel gives a positive click, a false positive pixel a negative one. With probability
//! [`PromptConfig::prob_click_from_gt`] a step ignores the prediction and clicks inside the
//! ground truth, as upstream.
//!
//! Every draw comes from [`prompt_rng`]`(seed, step, stream)`: the batch-wide decisions from
//! stream 0, object `k`'s clicks from stream `k + 1`, each in the micro-batch's own range of
//! streams (micro-batch `m` adds `m · 2³²`). Prompts are therefore a pure function of the run
//! seed, the optimizer step, the micro-batch and the object's position in it: a resumed run
//! draws exactly the prompts an uninterrupted one would, and a data-parallel replica the ones
//! an accumulating device would.
//!
//! Coordinates are integer pixel positions `(x, y)` of the `S × S` model input, as upstream
//! (the prompt encoder adds the half-pixel shift).

use segburn_data::rng::{mix, SplitMix64};
use serde::{Deserialize, Serialize};

use super::config_error::Sam2ConfigError;

/// Point labels of the prompt encoder.
pub const NEGATIVE: i32 = 0;
pub const POSITIVE: i32 = 1;
pub const BOX_TOP_LEFT: i32 = 2;
pub const BOX_BOTTOM_RIGHT: i32 = 3;

/// A box `[x0, y0, x1, y1]` as the prompt encoder reads it: two corner points.
pub fn box_clicks([x0, y0, x1, y1]: [f32; 4]) -> [Click; 2] {
    [
        Click {
            x: x0,
            y: y0,
            label: BOX_TOP_LEFT,
        },
        Click {
            x: x1,
            y: y1,
            label: BOX_BOTTOM_RIGHT,
        },
    ]
}

/// Separates the prompt streams from the data crate's epoch and sample streams.
const TAG_PROMPTS: u64 = 0x7072_6f6d_7074_735f; // "prompts_"

/// How prompts are simulated; the defaults are SAM2's released training values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromptConfig {
    /// Probability that a batch starts from a box rather than one click (SAM2: 0.5).
    pub prob_box: f64,
    /// Box noise as a fraction of the box side (SAM2: 0.1).
    pub box_noise: f64,
    /// Upper bound of the box noise in pixels (SAM2: 20, at 1024 px).
    pub box_noise_max: f64,
    /// Correction clicks after the first prompt (SAM2: 7).
    pub correction_steps: usize,
    /// Probability that a correction click ignores the prediction (SAM2: 0.1).
    pub prob_click_from_gt: f64,
    /// Correction clicks of the evaluation (during training and `eval-sam2`).
    pub eval_corrections: usize,
    /// Probability that a batch starts from each object's ground-truth mask as a mask prompt
    /// alone (no click, no box), shrunk to the prompt encoder's mask size as SAM2Base shrinks
    /// a mask input; correction clicks follow as after any first prompt. SAM2's video recipe
    /// starts from masks with probability `1 − prob_to_use_pt_input_for_train` (0.5), but
    /// forces points on single images: 0, the default, is its image recipe.
    pub prob_mask: f64,
}

impl Default for PromptConfig {
    fn default() -> Self {
        Self {
            prob_box: 0.5,
            box_noise: 0.1,
            box_noise_max: 20.0,
            correction_steps: 7,
            prob_click_from_gt: 0.1,
            eval_corrections: 3,
            prob_mask: 0.0,
        }
    }
}

impl PromptConfig {
    /// Rejects values that cannot work, naming the field.
    pub fn check(&self) -> Result<(), Sam2ConfigError> {
        for (field, value) in [
            ("prob_box", self.prob_box),
            ("prob_click_from_gt", self.prob_click_from_gt),
            ("prob_mask", self.prob_mask),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(Sam2ConfigError::PromptProbability { field, value });
            }
        }
        for (field, value) in [
            ("box_noise", self.box_noise),
            ("box_noise_max", self.box_noise_max),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Sam2ConfigError::PromptNoise { field, value });
            }
        }
        Ok(())
    }
}

/// One prompt point: pixel `(x, y)` and its prompt-encoder label.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Click {
    pub x: f32,
    pub y: f32,
    pub label: i32,
}

/// A square binary mask `size × size` (non-zero = inside), borrowed.
#[derive(Debug, Clone, Copy)]
pub struct MaskView<'a> {
    pub size: usize,
    pub pixels: &'a [u8],
}

impl MaskView<'_> {
    fn at(&self, index: usize) -> bool {
        self.pixels[index] != 0
    }
}

/// The generator of one prompt stream (see the module docs).
pub fn prompt_rng(seed: u64, step: u64, stream: u64) -> SplitMix64 {
    SplitMix64::new(mix(mix(mix(seed ^ TAG_PROMPTS) ^ step) ^ stream))
}

/// A uniform value in `[0, 1)` from the top 53 bits.
pub fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The tight box `(x0, y0, x1, y1)` of the mask in inclusive pixel coordinates
/// (`mask_to_box`); `None` when the mask is empty.
pub fn tight_box(mask: MaskView<'_>) -> Option<[f32; 4]> {
    let n = mask.size;
    let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
    for y in 0..n {
        for x in 0..n {
            if mask.at(y * n + x) {
                x0 = x0.min(x);
                y0 = y0.min(y);
                x1 = x1.max(x);
                y1 = y1.max(y);
            }
        }
    }
    (x0 != usize::MAX).then_some([x0 as f32, y0 as f32, x1 as f32, y1 as f32])
}

/// SAM2's `sample_box_points`: the tight box with each coordinate moved by
/// `U(−b, b)`, `b = min(noise · side, max_noise)` where side is `x1 − x0` for x and `y1 − y0`
/// for y, then clamped to the image. Returned as two points labelled 2 and 3.
pub fn noisy_box(
    mask: MaskView<'_>,
    noise: f64,
    max_noise: f64,
    rng: &mut SplitMix64,
) -> Option<[Click; 2]> {
    let [x0, y0, x1, y1] = tight_box(mask)?;
    let bound_x = (f64::from(x1 - x0) * noise).min(max_noise);
    let bound_y = (f64::from(y1 - y0) * noise).min(max_noise);
    let limit = (mask.size - 1) as f64;
    let mut jitter = |value: f32, bound: f64| {
        let moved = f64::from(value) + (2.0 * unit(rng) - 1.0) * bound;
        moved.clamp(0.0, limit) as f32
    };
    let (x0, y0) = (jitter(x0, bound_x), jitter(y0, bound_y));
    let (x1, y1) = (jitter(x1, bound_x), jitter(y1, bound_y));
    Some(box_clicks([x0, y0, x1, y1]))
}

/// A pixel drawn uniformly from those where `inside(index)` holds, or `None` if there is none.
fn uniform_pixel(
    size: usize,
    rng: &mut SplitMix64,
    inside: impl Fn(usize) -> bool,
) -> Option<(usize, usize)> {
    let count = (0..size * size).filter(|&i| inside(i)).count();
    if count == 0 {
        return None;
    }
    let chosen = rng.below(count as u64) as usize;
    let index = (0..size * size).filter(|&i| inside(i)).nth(chosen)?;
    Some((index % size, index / size))
}

/// One positive click uniformly inside the object (`get_next_point(gt, None, "uniform")`).
pub fn click_inside(mask: MaskView<'_>, rng: &mut SplitMix64) -> Option<Click> {
    uniform_pixel(mask.size, rng, |i| mask.at(i)).map(|(x, y)| Click {
        x: x as f32,
        y: y as f32,
        label: POSITIVE,
    })
}

/// SAM2's `sample_random_points_from_errors`: one click uniformly over the false negatives
/// (labelled positive) and false positives (labelled negative) of `prediction`. A perfect
/// prediction clicks on the background (negative), as upstream; with no background either, a
/// positive click inside the object.
pub fn correction_click(
    truth: MaskView<'_>,
    prediction: MaskView<'_>,
    rng: &mut SplitMix64,
) -> Option<Click> {
    let error = |i: usize| truth.at(i) != prediction.at(i);
    let any_error = (0..truth.pixels.len()).any(error);
    let picked = if any_error {
        uniform_pixel(truth.size, rng, error)
    } else {
        uniform_pixel(truth.size, rng, |i| !truth.at(i))
    };
    match picked {
        Some((x, y)) => {
            let positive = truth.at(y * truth.size + x);
            Some(Click {
                x: x as f32,
                y: y as f32,
                label: if positive { POSITIVE } else { NEGATIVE },
            })
        }
        None => click_inside(truth, rng),
    }
}

/// The first prompt of every object of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum FirstPrompt {
    /// Points per object: one click, or a box as two points labelled 2 and 3.
    Points(Vec<Vec<Click>>),
    /// Each object's ground-truth mask, alone, as the mask prompt.
    TruthMask,
}

/// Draws the prompts of one training step: [`TrainingPrompts::first`], then
/// [`TrainingPrompts::correction`] for each correction step.
#[derive(Debug, Clone)]
pub struct TrainingPrompts {
    config: PromptConfig,
    batch_rng: SplitMix64,
    object_rngs: Vec<SplitMix64>,
}

impl TrainingPrompts {
    /// The prompt streams of micro-batch `micro_batch` of optimizer step `step` for
    /// `num_objects` objects.
    pub fn new(
        config: &PromptConfig,
        seed: u64,
        step: u64,
        micro_batch: usize,
        num_objects: usize,
    ) -> Self {
        let first = (micro_batch as u64) << 32;
        Self {
            config: config.clone(),
            batch_rng: prompt_rng(seed, step, first),
            object_rngs: (0..num_objects)
                .map(|k| prompt_rng(seed, step, first | (k as u64 + 1)))
                .collect(),
        }
    }

    /// The first prompt of every object: all ground-truth masks, all boxes or all single
    /// clicks (decided once per batch, as SAM2 decides per frame).
    pub fn first(&mut self, truths: &[MaskView<'_>]) -> FirstPrompt {
        let use_box = unit(&mut self.batch_rng) < self.config.prob_box;
        // Drawn only when enabled: runs without mask prompts keep the prompts (and the exact
        // resume) they had before the option existed.
        if self.config.prob_mask > 0.0 && unit(&mut self.batch_rng) < self.config.prob_mask {
            return FirstPrompt::TruthMask;
        }
        let points = truths
            .iter()
            .zip(&mut self.object_rngs)
            .map(|(truth, rng)| {
                let prompt = if use_box {
                    noisy_box(
                        *truth,
                        self.config.box_noise,
                        self.config.box_noise_max,
                        rng,
                    )
                    .map(Vec::from)
                } else {
                    click_inside(*truth, rng).map(|c| vec![c])
                };
                // An empty object still needs a prompt of the batch's shape: the image centre.
                prompt.unwrap_or_else(|| fallback(truth.size, use_box))
            })
            .collect();
        FirstPrompt::Points(points)
    }

    /// One correction click per object from its error region (or from the ground truth alone,
    /// with probability `prob_click_from_gt`).
    pub fn correction(
        &mut self,
        truths: &[MaskView<'_>],
        predictions: &[MaskView<'_>],
    ) -> Vec<Click> {
        let from_truth = unit(&mut self.batch_rng) < self.config.prob_click_from_gt;
        truths
            .iter()
            .zip(predictions)
            .zip(&mut self.object_rngs)
            .map(|((truth, prediction), rng)| {
                let click = if from_truth {
                    click_inside(*truth, rng)
                } else {
                    correction_click(*truth, *prediction, rng)
                };
                click.unwrap_or_else(|| fallback(truth.size, false)[0])
            })
            .collect()
    }
}

/// The box around the whole `size × size` input.
pub fn whole_image_box(size: usize) -> [f32; 4] {
    let last = (size - 1) as f32;
    [0.0, 0.0, last, last]
}

fn fallback(size: usize, as_box: bool) -> Vec<Click> {
    let c = (size / 2) as f32;
    if as_box {
        box_clicks(whole_image_box(size)).to_vec()
    } else {
        vec![Click {
            x: c,
            y: c,
            label: POSITIVE,
        }]
    }
}

#[cfg(test)]
#[path = "prompts_tests.rs"]
mod tests;

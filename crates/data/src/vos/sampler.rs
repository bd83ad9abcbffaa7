//! Drawing a training clip, as the official SAM 2 `RandomUniformSampler`
//! (`training/dataset/vos_sampler.py`) does:
//!
//! 1. a start, uniform over `0..=A - num_frames` where `A` is the number of annotated frames;
//!    the clip is the `num_frames` consecutive annotated frames from there;
//! 2. with probability `reverse_time_prob`, the clip plays backwards;
//! 3. the objects visible (at least one pixel) in the clip's first frame, after any reversal;
//!    with none, back to 1 (up to [`MAX_TRIES`] times, as the official `MAX_RETRIES`);
//! 4. at most `max_num_objects` of them, drawn without replacement in random order (as
//!    Python's `random.sample`).
//!
//! The draws come from a [`SplitMix64`] the caller seeds (the dataset uses
//! `for_sample(seed, epoch, video)`), so a clip never depends on threads or call order.
//! Where the official dataset gives up on a video and silently retries another, this returns
//! an error naming the video.

use super::config::ClipConfig;
use super::error::VosError;
use super::scan::VosVideo;
use crate::rng::SplitMix64;

/// How often a start is redrawn when the clip's first frame shows no object.
pub const MAX_TRIES: usize = 1000;

/// Which frames and objects a clip holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClipPlan {
    /// Positions in the video's `frames`, in clip order (descending when reversed).
    pub frames: Vec<usize>,
    /// The clip's objects, in the order drawn.
    pub object_ids: Vec<u32>,
    pub reversed: bool,
}

impl ClipPlan {
    /// Every frame of the video in order, with the objects of its first annotated frame:
    /// the semi-supervised evaluation protocol (the official `EvalSampler`).
    pub fn whole_video(video: &VosVideo) -> Self {
        Self {
            frames: (0..video.frames.len()).collect(),
            object_ids: video.object_ids.clone(),
            reversed: false,
        }
    }
}

/// A uniform float in `[0, 1)` from the top 53 bits of a draw.
fn uniform(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Draws the clip of `video`. `visible(position)` gives the ids with at least one pixel in
/// the annotation of frame `position` (the dataset reads the file; tests pass a table).
pub fn sample_clip(
    config: &ClipConfig,
    video: &VosVideo,
    rng: &mut SplitMix64,
    mut visible: impl FnMut(usize) -> Result<Vec<u32>, VosError>,
) -> Result<ClipPlan, VosError> {
    config.validate()?;
    let annotated = video.annotated_positions();
    if annotated.len() < config.num_frames {
        return Err(VosError::VideoTooShort {
            video: video.name.clone(),
            annotated: annotated.len(),
            num_frames: config.num_frames,
        });
    }
    let starts = (annotated.len() - config.num_frames + 1) as u64;
    for _ in 0..MAX_TRIES {
        let start = rng.below(starts) as usize;
        let mut frames = annotated[start..start + config.num_frames].to_vec();
        let reversed = uniform(rng) < config.reverse_time_prob;
        if reversed {
            frames.reverse();
        }
        let mut candidates = visible(frames[0])?;
        if candidates.is_empty() {
            continue;
        }
        // A partial Fisher–Yates shuffle: the first `k` are a uniform draw, in random order.
        let k = candidates.len().min(config.max_num_objects);
        for i in 0..k {
            let j = i + rng.below((candidates.len() - i) as u64) as usize;
            candidates.swap(i, j);
        }
        candidates.truncate(k);
        return Ok(ClipPlan {
            frames,
            object_ids: candidates,
            reversed,
        });
    }
    Err(VosError::NoVisibleObjects {
        video: video.name.clone(),
        tries: MAX_TRIES,
    })
}

//! Training clips of a split: each epoch visits every video once in a seeded order, and draws
//! one clip of each.
//!
//! A clip is a pure function of `(seed, epoch, video)`: the order of epoch `e` is the data
//! crate's permutation of `(seed, e)`, and video `v` draws its clip from
//! `SplitMix64::for_sample(seed, e, v)`. Any number of loader threads therefore yields the same
//! clips, and a resumed run sees the clips an uninterrupted one would.

use std::collections::HashMap;

use super::annotation::read_annotation;
use super::clip::{read_clip, VosClip};
use super::config::ClipConfig;
use super::error::VosError;
use super::sampler::{sample_clip, ClipPlan};
use super::scan::{VosIndex, VosVideo};
use crate::rng::{epoch_permutation, SplitMix64};

/// The videos of a split with how clips are drawn from them.
#[derive(Debug, Clone)]
pub struct VosDataset {
    index: VosIndex,
    clips: ClipConfig,
    seed: u64,
}

impl VosDataset {
    /// Checks the clip settings and that every video has `num_frames` annotated frames (the
    /// official dataset would skip a short video at random; here it is named up front).
    pub fn new(index: VosIndex, clips: ClipConfig, seed: u64) -> Result<Self, VosError> {
        clips.validate()?;
        for video in index.videos() {
            let annotated = video.annotated_positions().len();
            if annotated < clips.num_frames {
                return Err(VosError::VideoTooShort {
                    video: video.name.clone(),
                    annotated,
                    num_frames: clips.num_frames,
                });
            }
        }
        Ok(Self { index, clips, seed })
    }

    pub fn index(&self) -> &VosIndex {
        &self.index
    }

    pub fn clip_config(&self) -> &ClipConfig {
        &self.clips
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The number of videos, which is the number of clips per epoch.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The video index read at each position of `epoch`.
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        epoch_permutation(self.seed, epoch, self.len())
    }

    fn video(&self, index: usize) -> Result<&VosVideo, VosError> {
        self.index
            .videos()
            .get(index)
            .ok_or(VosError::VideoOutOfRange {
                index,
                len: self.len(),
            })
    }

    /// The frames and objects of video `index`'s clip in `epoch` (reads the annotations of
    /// candidate first frames, no image).
    pub fn plan(&self, epoch: u64, index: usize) -> Result<ClipPlan, VosError> {
        let video = self.video(index)?;
        let mut rng = SplitMix64::for_sample(self.seed, epoch, index as u64);
        // A video whose early frames are empty can redraw often: read each annotation once.
        let mut seen: HashMap<usize, Vec<u32>> = HashMap::new();
        sample_clip(&self.clips, video, &mut rng, |position| {
            if let Some(ids) = seen.get(&position) {
                return Ok(ids.clone());
            }
            let path = video.frames[position].annotation.as_deref();
            let ids = match path {
                Some(path) => read_annotation(path)?.object_ids(),
                None => Vec::new(),
            };
            seen.insert(position, ids.clone());
            Ok(ids)
        })
    }

    /// The clip of video `index` in `epoch`.
    pub fn clip(&self, epoch: u64, index: usize) -> Result<VosClip, VosError> {
        let plan = self.plan(epoch, index)?;
        read_clip(self.video(index)?, &plan)
    }

    /// The clip read at `position` of `epoch`'s order.
    pub fn train_clip(&self, epoch: u64, position: usize) -> Result<VosClip, VosError> {
        let order = self.epoch_order(epoch);
        let index = *order.get(position).ok_or(VosError::VideoOutOfRange {
            index: position,
            len: self.len(),
        })?;
        self.clip(epoch, index)
    }

    /// The whole video `index` with the objects of its first annotated frame (evaluation).
    pub fn eval_clip(&self, index: usize) -> Result<VosClip, VosError> {
        let video = self.video(index)?;
        read_clip(video, &ClipPlan::whole_video(video))
    }
}

//! Reading a clip: its frames as RGB and one binary mask per object and frame.

use std::collections::HashMap;

use super::annotation::{read_annotation, VOID};
use super::error::VosError;
use super::sampler::ClipPlan;
use super::scan::VosVideo;
use crate::decode::{read_image_with, Orientation};

/// The frames and object masks of a clip, at the video's size, in clip order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VosClip {
    pub video: String,
    pub width: usize,
    pub height: usize,
    /// The frames' positions in the video (descending when reversed).
    pub frames: Vec<usize>,
    /// The frames' file stems.
    pub frame_names: Vec<String>,
    /// Whether each frame has an annotation; an unannotated frame's masks are all 0.
    pub annotated: Vec<bool>,
    /// The objects, in the order of the masks' `K` axis.
    pub object_ids: Vec<u32>,
    pub reversed: bool,
    /// `[T, H, W, 3]` RGB.
    pub images: Vec<u8>,
    /// `[T, K, H, W]`, 1 where the pixel belongs to object `k`, else 0.
    pub masks: Vec<u8>,
    /// `[T, H, W]`, 1 on void (255) pixels, which belong to no object and to no background.
    pub void: Vec<u8>,
}

impl VosClip {
    /// `T`, the number of frames.
    pub fn num_frames(&self) -> usize {
        self.frames.len()
    }

    /// `K`, the number of objects.
    pub fn num_objects(&self) -> usize {
        self.object_ids.len()
    }

    /// The mask of object `k` (its position in `object_ids`) in frame `t`: `H * W` values.
    pub fn mask(&self, t: usize, k: usize) -> &[u8] {
        let plane = self.width * self.height;
        let at = (t * self.num_objects() + k) * plane;
        &self.masks[at..at + plane]
    }

    /// Frame `t`: `H * W * 3` values.
    pub fn image(&self, t: usize) -> &[u8] {
        let size = self.width * self.height * 3;
        &self.images[t * size..(t + 1) * size]
    }
}

/// Reads the frames and masks `plan` names. Every frame and annotation must have the size of
/// the video's first frame; a frame read twice (a plan may repeat one) is decoded once.
pub fn read_clip(video: &VosVideo, plan: &ClipPlan) -> Result<VosClip, VosError> {
    let (width, height) = (video.width, video.height);
    let plane = width * height;
    let k = plan.object_ids.len();
    let t = plan.frames.len();
    let mut clip = VosClip {
        video: video.name.clone(),
        width,
        height,
        frames: plan.frames.clone(),
        frame_names: Vec::with_capacity(t),
        annotated: Vec::with_capacity(t),
        object_ids: plan.object_ids.clone(),
        reversed: plan.reversed,
        images: Vec::with_capacity(t * plane * 3),
        masks: vec![0; t * k * plane],
        void: vec![0; t * plane],
    };
    // Object id -> its slot on the K axis; ids not in the plan map to nothing.
    let mut slot = [None; 256];
    for (index, &id) in plan.object_ids.iter().enumerate() {
        if let Some(entry) = usize::try_from(id).ok().and_then(|id| slot.get_mut(id)) {
            *entry = Some(index);
        }
    }
    let mut decoded: HashMap<usize, usize> = HashMap::new();
    for (step, &position) in plan.frames.iter().enumerate() {
        let frame = video
            .frames
            .get(position)
            .ok_or_else(|| VosError::config("plan.frames", out_of_range(video, position)))?;
        clip.frame_names.push(frame.name.clone());
        clip.annotated.push(frame.annotation.is_some());
        if let Some(&earlier) = decoded.get(&position) {
            clip.images
                .extend_from_within(earlier * plane * 3..(earlier + 1) * plane * 3);
            let (masks, void) = (earlier * k * plane, earlier * plane);
            clip.masks
                .copy_within(masks..masks + k * plane, step * k * plane);
            clip.void.copy_within(void..void + plane, step * plane);
            continue;
        }
        decoded.insert(position, step);
        let image = read_image_with(&frame.image, Orientation::AsStored)?;
        video.check_size(&frame.image, image.width, image.height)?;
        clip.images.extend_from_slice(&image.pixels);
        let Some(path) = &frame.annotation else {
            continue;
        };
        let annotation = read_annotation(path)?;
        video.check_size(path, annotation.width, annotation.height)?;
        let masks = &mut clip.masks[step * k * plane..(step + 1) * k * plane];
        let void = &mut clip.void[step * plane..(step + 1) * plane];
        for (pixel, &id) in annotation.ids.iter().enumerate() {
            if id == VOID {
                void[pixel] = 1;
            } else if let Some(index) = slot[usize::from(id)] {
                masks[index * plane + pixel] = 1;
            }
        }
    }
    Ok(clip)
}

fn out_of_range(video: &VosVideo, position: usize) -> String {
    format!(
        "frame {position} does not exist: video `{}` has {} frames",
        video.name,
        video.frames.len()
    )
}

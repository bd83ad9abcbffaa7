//! Prompting an object on a frame (`add_new_points_or_box`, `add_new_mask`): the frame is
//! predicted at once for that object, and the masks of every object on the frame are returned.

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};

use super::objects::FrameClicks;
use super::track::StepRequest;
use super::{FrameMasks, Sam2VideoPredictor};
use crate::sam2::preprocess::resize_planes;
use crate::sam2::video::NO_OBJECT_SCORE;
use crate::sam2::{upscale_mask_logits, PointPrompts, Sam2Error};

/// A prompt for one object on one frame, in the video's pixels.
#[derive(Debug, Clone)]
pub enum ObjectPrompt {
    /// Clicks (label 1 inside, 0 outside) and/or a box `[x0, y0, x1, y1]`.
    Clicks {
        /// `(x, y)` per click.
        points: Vec<[f32; 2]>,
        /// 1 or 0 per click.
        labels: Vec<i32>,
        /// A box, embedded before the clicks.
        bounding_box: Option<[f32; 4]>,
        /// Replace the frame's earlier clicks (true) or add to them (false; not with a box).
        clear_old_clicks: bool,
    },
    /// A binary mask `height × width` (row-major), resized to the model's input if needed.
    Mask {
        /// `true` inside the object.
        mask: Vec<bool>,
        /// `[height, width]`.
        size: [usize; 2],
    },
}

impl ObjectPrompt {
    /// Clicks replacing the frame's earlier ones.
    pub fn clicks(points: Vec<[f32; 2]>, labels: Vec<i32>) -> Self {
        Self::Clicks {
            points,
            labels,
            bounding_box: None,
            clear_old_clicks: true,
        }
    }

    /// A box alone.
    pub fn bounding_box(bounding_box: [f32; 4]) -> Self {
        Self::Clicks {
            points: Vec::new(),
            labels: Vec::new(),
            bounding_box: Some(bounding_box),
            clear_old_clicks: true,
        }
    }
}

impl<B: Backend> Sam2VideoPredictor<'_, B> {
    /// Prompts object `object_id` on `frame` (a new id adds an object) and predicts the frame
    /// for it; returns every object's masks on that frame at the video's resolution.
    pub fn add_prompt(
        &mut self,
        frame: usize,
        object_id: u32,
        prompt: ObjectPrompt,
    ) -> Result<FrameMasks<B>, Sam2Error> {
        if frame >= self.num_frames() {
            return Err(Sam2Error::prompt(format!(
                "frame {frame} does not exist (the video has {} frames)",
                self.num_frames()
            )));
        }
        let (clicks, mask) = match prompt {
            ObjectPrompt::Clicks {
                points,
                labels,
                bounding_box,
                clear_old_clicks,
            } => (
                Some(self.clicks(points, labels, bounding_box, clear_old_clicks)?),
                None,
            ),
            ObjectPrompt::Mask { mask, size } => (None, Some(self.mask_input(&mask, size)?)),
        };
        let index = self.object_index(object_id);
        let object = &mut self.objects[index];
        let clicks = match (clicks, mask.is_some()) {
            (Some((new, clear_old)), _) => {
                let merged = match object.clicks.get(frame).filter(|_| !clear_old) {
                    Some(old) => PointPrompts {
                        coords: Tensor::cat(vec![old.coords.clone(), new.coords], 1),
                        labels: Tensor::cat(vec![old.labels.clone(), new.labels], 1),
                    },
                    None => new,
                };
                object.clicks.insert(frame, merged.clone());
                object.masks.remove(frame);
                Some(merged)
            }
            _ => {
                if let Some(mask) = &mask {
                    object.masks.insert(frame, mask.clone());
                }
                object.clicks.remove(frame);
                None
            }
        };
        let is_init_cond_frame = !object.tracked.contains(frame);
        let reverse = object.tracked.get(frame).copied().unwrap_or(false);
        let is_cond = is_init_cond_frame || self.settings.add_all_frames_to_correct_as_cond;
        // New clicks are prompted together with the frame's previous mask.
        let previous_logits = clicks
            .as_ref()
            .and_then(|_| object.latest_output(frame, is_cond))
            .map(|out| out.pred_masks.clone().clamp(-32.0, 32.0));
        let outputs = std::mem::take(&mut object.outputs);
        let step = StepRequest {
            frame,
            is_init_cond_frame,
            clicks: clicks.as_ref(),
            mask,
            reverse,
            run_memory_encoder: false,
            previous_logits,
        };
        let result = self.track_step(&outputs, step);
        let object = &mut self.objects[index];
        object.outputs = outputs;
        object.pending.map_mut(is_cond).insert(frame, result?);
        self.frame_masks_now(frame, is_cond)
    }

    /// Every object's latest mask on `frame` at the video's resolution (`-1024` for an object
    /// with no output there): `_consolidate_temp_output_across_obj` at video resolution.
    fn frame_masks_now(&self, frame: usize, is_cond: bool) -> Result<FrameMasks<B>, Sam2Error> {
        let [h, w] = self.video_size;
        let device = self.device.clone();
        let masks: Vec<Tensor<B, 4>> = self
            .objects
            .iter()
            .map(|object| match object.latest_output(frame, is_cond) {
                Some(out) => upscale_mask_logits(out.pred_masks.clone(), [h, w]),
                None => Tensor::full([1, 1, h, w], NO_OBJECT_SCORE, &device),
            })
            .collect();
        Ok(FrameMasks {
            frame,
            object_ids: self.object_ids(),
            logits: self.returned(Tensor::cat(masks, 0)),
        })
    }

    /// Clicks in the video's pixels -> the model's input pixels `[1, N, 2]` (box corners
    /// first, labels 2 and 3), as upstream computes them in f32: `p / [W, H] · S`.
    fn clicks(
        &self,
        points: Vec<[f32; 2]>,
        labels: Vec<i32>,
        bounding_box: Option<[f32; 4]>,
        clear_old: bool,
    ) -> Result<(FrameClicks<B>, bool), Sam2Error> {
        if points.len() != labels.len() {
            return Err(Sam2Error::prompt(format!(
                "{} clicks but {} labels",
                points.len(),
                labels.len()
            )));
        }
        if let Some(label) = labels.iter().find(|&&l| l != 0 && l != 1) {
            return Err(Sam2Error::prompt(format!(
                "click label {label}: use 1 (inside the object) or 0 (outside)"
            )));
        }
        if points.is_empty() && bounding_box.is_none() {
            return Err(Sam2Error::prompt("a prompt needs clicks or a box"));
        }
        if bounding_box.is_some() && !clear_old {
            return Err(Sam2Error::prompt(
                "a box must come before any click: give it with clear_old_clicks = true",
            ));
        }
        let mut all: Vec<[f32; 2]> = Vec::new();
        let mut all_labels = Vec::new();
        if let Some([x0, y0, x1, y1]) = bounding_box {
            all.extend([[x0, y0], [x1, y1]]);
            all_labels.extend([2, 3]);
        }
        all.extend(points);
        all_labels.extend(labels);
        if let Some(bad) = all.iter().flatten().find(|v| !v.is_finite()) {
            return Err(Sam2Error::prompt(format!(
                "coordinate {bad} is not a finite number"
            )));
        }
        let [video_h, video_w] = self.video_size.map(|v| v as f32);
        let [size_h, size_w] = self.image_size.map(|v| v as f32);
        let coords: Vec<f32> = all
            .iter()
            .flat_map(|[x, y]| [x / video_w * size_w, y / video_h * size_h])
            .collect();
        let n = all.len();
        let device = self.device.clone();
        let coords = Tensor::from_data(TensorData::new(coords, [1, n, 2]), &device);
        let labels = Tensor::<B, 2, Int>::from_data(TensorData::new(all_labels, [1, n]), &device);
        Ok((PointPrompts { coords, labels }, clear_old))
    }

    /// A binary mask -> `[1, 1, S, S]` in {0, 1}: as is at the model's size, else shrunk with
    /// the antialiased bilinear filter and thresholded at 0.5.
    fn mask_input(&self, mask: &[bool], [h, w]: [usize; 2]) -> Result<Tensor<B, 4>, Sam2Error> {
        if h == 0 || w == 0 || mask.len() != h * w {
            return Err(Sam2Error::prompt(format!(
                "a {h}×{w} mask needs {} values, got {}",
                h * w,
                mask.len()
            )));
        }
        let [s_h, s_w] = self.image_size;
        let values: Vec<f64> = mask.iter().map(|&m| f64::from(u8::from(m))).collect();
        let values = if [h, w] == [s_h, s_w] {
            values
        } else {
            resize_planes(&values, [1, h, w], [s_h, s_w])
                .into_iter()
                .map(|v| if v >= 0.5 { 1.0 } else { 0.0 })
                .collect()
        };
        let device = self.device.clone();
        let data = TensorData::new(values, [1, 1, s_h, s_w]);
        Ok(Tensor::<B, 4>::from_data(data, (&device, self.dtype)))
    }
}

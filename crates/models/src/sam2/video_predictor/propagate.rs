//! Tracking the prompted objects through the video (`propagate_in_video` and its preflight):
//! the prompts' outputs get their memories, then every frame in order is predicted for every
//! object from its memory bank.

use burn::tensor::{backend::Backend, Tensor};

use super::track::StepRequest;
use super::{FrameMasks, Sam2VideoPredictor};
use crate::sam2::{upscale_mask_logits, Sam2Error};

impl<B: Backend> Sam2VideoPredictor<'_, B> {
    /// Tracks every object from `start` (default: the first prompted frame) over at most
    /// `max_frames` frames after it (default: to the end), backwards when `reverse`; returns the
    /// masks of every frame in the order they were computed.
    pub fn propagate(
        &mut self,
        start: Option<usize>,
        max_frames: Option<usize>,
        reverse: bool,
    ) -> Result<Vec<FrameMasks<B>>, Sam2Error> {
        let mut frames = Vec::new();
        self.propagate_with(start, max_frames, reverse, |masks| {
            frames.push(masks);
            Ok(())
        })?;
        Ok(frames)
    }

    /// [`Self::propagate`], handing each frame's masks to `each` as soon as they are computed
    /// (a long video need not be held in memory).
    pub fn propagate_with(
        &mut self,
        start: Option<usize>,
        max_frames: Option<usize>,
        reverse: bool,
        mut each: impl FnMut(FrameMasks<B>) -> Result<(), Sam2Error>,
    ) -> Result<(), Sam2Error> {
        self.preflight()?;
        let num_frames = self.num_frames();
        let first_prompted = self
            .objects
            .iter()
            .flat_map(|o| o.outputs.cond.frames())
            .min()
            .unwrap_or(0);
        let start = start.unwrap_or(first_prompted);
        if start >= num_frames {
            return Err(Sam2Error::prompt(format!(
                "start frame {start} does not exist (the video has {num_frames} frames)"
            )));
        }
        let span = max_frames.unwrap_or(num_frames);
        let order: Vec<usize> = if reverse {
            let end = start.saturating_sub(span);
            // Upstream skips reverse tracking that starts at frame 0.
            if start > 0 {
                (end..=start).rev().collect()
            } else {
                Vec::new()
            }
        } else {
            (start..=(start + span).min(num_frames - 1)).collect()
        };
        for frame in order {
            let mut masks = Vec::with_capacity(self.objects.len());
            for index in 0..self.objects.len() {
                let object = &mut self.objects[index];
                let pred_masks = match object.outputs.cond.get(frame) {
                    Some(out) => out.pred_masks.clone(),
                    None => {
                        let outputs = std::mem::take(&mut object.outputs);
                        let step = StepRequest {
                            frame,
                            is_init_cond_frame: false,
                            clicks: None,
                            mask: None,
                            reverse,
                            run_memory_encoder: true,
                            previous_logits: None,
                        };
                        let result = self.track_step(&outputs, step);
                        let object = &mut self.objects[index];
                        object.outputs = outputs;
                        let out = result?;
                        let pred_masks = out.pred_masks.clone();
                        object.outputs.non_cond.insert(frame, out);
                        pred_masks
                    }
                };
                self.objects[index].tracked.insert(frame, reverse);
                masks.push(pred_masks);
            }
            let logits = self.returned(upscale_mask_logits(Tensor::cat(masks, 0), self.video_size));
            each(FrameMasks {
                frame,
                object_ids: self.object_ids(),
                logits,
            })?;
        }
        Ok(())
    }

    /// `propagate_in_video_preflight`: the prompts' outputs get their memories (from their
    /// masks, as if from clicks) and join the object's outputs; a prompted frame is no longer
    /// a tracked one.
    fn preflight(&mut self) -> Result<(), Sam2Error> {
        if self.objects.is_empty() {
            return Err(Sam2Error::prompt(
                "no object has a prompt: add clicks, a box or a mask first",
            ));
        }
        for index in 0..self.objects.len() {
            for is_cond in [false, true] {
                let pending = self.objects[index].pending.map_mut(is_cond).drain();
                for (frame, mut out) in pending {
                    if out.memory.is_none() {
                        let features = self.frame_features(frame)?;
                        let high_res = upscale_mask_logits(out.pred_masks.clone(), self.image_size);
                        let memory = self.model.encode_memory(
                            features.image_embed,
                            high_res,
                            out.object_score_logits.clone(),
                            true,
                            &self.video_config,
                        )?;
                        out.memory = Some(self.stored(memory)?);
                    }
                    self.objects[index]
                        .outputs
                        .map_mut(is_cond)
                        .insert(frame, out);
                }
            }
            let object = &mut self.objects[index];
            if object.outputs.cond.is_empty() {
                return Err(Sam2Error::prompt(format!(
                    "object {} has no prompted frame: add clicks, a box or a mask first",
                    object.id
                )));
            }
            let prompted: Vec<usize> = object.outputs.cond.frames().collect();
            for frame in prompted {
                object.outputs.non_cond.remove(frame);
            }
        }
        Ok(())
    }
}

//! One object on one frame (`SAM2Base.track_step` and the memory selection of
//! `_prepare_memory_conditioned_features`): which past frames it reads, the heads' prediction,
//! and the frame's new memory.

use burn::tensor::{backend::Backend, DType, Tensor};

use super::holes::fill_holes;
use super::objects::{FrameClicks, FrameOutput, FrameOutputs};
use super::Sam2VideoPredictor;
use crate::sam2::video::{FramePointer, FramePrediction, SlottedMemory};
use crate::sam2::{ImageFeatures, Sam2Error};

/// What a track step is asked to do.
pub(super) struct StepRequest<'a, B: Backend> {
    pub frame: usize,
    /// The object's first prompt on this frame (no memory is read).
    pub is_init_cond_frame: bool,
    pub clicks: Option<&'a FrameClicks<B>>,
    /// `[1, 1, S, S]` in [0, 1].
    pub mask: Option<Tensor<B, 4>>,
    pub reverse: bool,
    pub run_memory_encoder: bool,
    /// The frame's previous mask logits (clamped to ±32), prompted together with new clicks.
    pub previous_logits: Option<Tensor<B, 4>>,
}

/// Past frames' memories and pointers chosen for one frame.
struct Selection<'a, B: Backend> {
    memories: Vec<SlottedMemory<'a, B>>,
    pointers: Vec<FramePointer<'a, B>>,
}

impl<B: Backend> Sam2VideoPredictor<'_, B> {
    /// `_run_single_frame_inference` for one object: its output on the frame (holes filled as
    /// `fill_hole_area` asks) and the prediction's mask logits before storage.
    pub(super) fn track_step(
        &mut self,
        outputs: &FrameOutputs<B>,
        request: StepRequest<'_, B>,
    ) -> Result<FrameOutput<B>, Sam2Error> {
        let features = self.frame_features(request.frame)?;
        let model = self.model;
        let prediction = match (&request.mask, request.clicks) {
            (Some(mask), _) => model.mask_as_output(&features, mask.clone())?,
            (None, clicks) => {
                let pix = if request.is_init_cond_frame {
                    model.condition_on_memory(features.image_embed.clone(), &[], &[], 1)?
                } else {
                    let selection = self.select_memory(outputs, request.frame, request.reverse)?;
                    model.condition_on_memory(
                        features.image_embed.clone(),
                        &selection.memories,
                        &selection.pointers,
                        self.max_obj_ptrs(),
                    )?
                };
                let conditioned = ImageFeatures {
                    image_embed: pix,
                    high_res: features.high_res.clone(),
                };
                let points = clicks.map(|c| c.labels.dims()[1]).unwrap_or(0);
                let multimask =
                    request.is_init_cond_frame || self.settings.multimask_output_for_tracking;
                let multimask = multimask
                    && (self.settings.multimask_min_pt_num..=self.settings.multimask_max_pt_num)
                        .contains(&points);
                model.frame_heads(
                    &conditioned,
                    clicks.cloned(),
                    request.previous_logits,
                    multimask,
                )?
            }
        };
        let FramePrediction {
            low_res_masks,
            high_res_masks,
            obj_ptr,
            object_score_logits,
            ..
        } = prediction;
        let memory = if request.run_memory_encoder {
            let memory = model.encode_memory(
                features.image_embed,
                high_res_masks,
                object_score_logits.clone(),
                request.clicks.is_some(),
                &self.video_config,
            )?;
            Some(self.stored(memory)?)
        } else {
            None
        };
        let pred_masks = fill_holes(low_res_masks, self.settings.fill_hole_area)?;
        Ok(FrameOutput {
            memory,
            pred_masks,
            obj_ptr,
            object_score_logits,
        })
    }

    /// Upstream keeps memory features in bf16 (`maskmem_features.to(torch.bfloat16)`); they
    /// are read back as such, so the rounding is part of the model's behaviour. A device that
    /// has no bf16 (wgpu) gets the same rounding on the host.
    pub(super) fn stored(
        &self,
        mut memory: crate::sam2::video::Memory<B>,
    ) -> Result<crate::sam2::video::Memory<B>, Sam2Error> {
        let features = memory.features;
        let dtype = features.dtype();
        memory.features = if B::supports_dtype(&self.device, DType::BF16) {
            features.cast(DType::BF16).cast(dtype)
        } else {
            let shape = features.dims();
            let values: Vec<f32> = features
                .into_data()
                .convert::<f32>()
                .to_vec()
                .map_err(|e| Sam2Error::shape(format!("memory features: {e:?}")))?;
            let rounded: Vec<f32> = values
                .into_iter()
                .map(|v| half::bf16::from_f32(v).to_f32())
                .collect();
            let data = burn::tensor::TensorData::new(rounded, shape);
            Tensor::from_data(data, (&self.device, dtype))
        };
        Ok(memory)
    }

    /// `min(frames, max_obj_ptrs_in_encoder)`.
    pub(super) fn max_obj_ptrs(&self) -> usize {
        self.num_frames()
            .min(self.video_config.max_obj_ptrs_in_encoder)
    }

    /// The memories and pointers frame `frame` reads (eval mode: temporal stride
    /// `memory_temporal_stride_for_eval`, pointers only from the past).
    fn select_memory<'a>(
        &self,
        outputs: &'a FrameOutputs<B>,
        frame: usize,
        reverse: bool,
    ) -> Result<Selection<'a, B>, Sam2Error> {
        if outputs.cond.is_empty() {
            return Err(Sam2Error::prompt(format!(
                "frame {frame}: the object has no prompted frame to track from"
            )));
        }
        let (selected, unselected) = select_closest_cond_frames(
            frame,
            &outputs.cond.frames().collect::<Vec<_>>(),
            self.settings.max_cond_frames_in_attn,
        );
        let cond = |t: usize| outputs.cond.get(t).expect("a selected frame has an output");
        let unselected_output = |t: i64| -> Option<&'a FrameOutput<B>> {
            let t = usize::try_from(t).ok()?;
            unselected.contains(&t).then(|| cond(t))
        };
        let lookup = |t: i64| {
            usize::try_from(t)
                .ok()
                .and_then(|t| outputs.non_cond.get(t))
                .or_else(|| unselected_output(t))
        };
        let num_maskmem = self.video_config.num_maskmem;
        let stride = self.settings.memory_temporal_stride_for_eval.max(1) as i64;
        let f = frame as i64;
        let mut memories = Vec::new();
        let mut slotted = |t_pos: usize, output: &'a FrameOutput<B>| -> Result<(), Sam2Error> {
            let memory = output.memory.as_ref().ok_or_else(|| {
                Sam2Error::prompt("a frame in memory has no encoded memory (propagate first)")
            })?;
            memories.push(SlottedMemory { t_pos, memory });
            Ok(())
        };
        for &t in &selected {
            slotted(0, cond(t))?;
        }
        for t_pos in 1..num_maskmem {
            let t_rel = (num_maskmem - t_pos) as i64;
            let previous = match (t_rel, reverse) {
                (1, false) => f - 1,
                (1, true) => f + 1,
                (_, false) => (f - 2).div_euclid(stride) * stride - (t_rel - 2) * stride,
                (_, true) => -((-(f + 2)).div_euclid(stride)) * stride + (t_rel - 2) * stride,
            };
            if let Some(output) = lookup(previous) {
                slotted(t_pos, output)?;
            }
        }
        let sign = if reverse { -1 } else { 1 };
        let mut pointers: Vec<FramePointer<'a, B>> = selected
            .iter()
            .filter(|&&t| if reverse { t >= frame } else { t <= frame })
            .map(|&t| FramePointer {
                t_diff: (f - t as i64) * sign,
                obj_ptr: &cond(t).obj_ptr,
            })
            .collect();
        let num_frames = self.num_frames() as i64;
        for t_diff in 1..self.max_obj_ptrs() as i64 {
            let t = if reverse { f + t_diff } else { f - t_diff };
            if t < 0 || t >= num_frames {
                break;
            }
            if let Some(output) = lookup(t) {
                pointers.push(FramePointer {
                    t_diff,
                    obj_ptr: &output.obj_ptr,
                });
            }
        }
        Ok(Selection { memories, pointers })
    }
}

/// `select_closest_cond_frames`: with a limit, the closest prompted frame before `frame`, the
/// closest at or after it, then the others by distance. `(selected, unselected)`, selected in
/// the map's order when every frame is kept.
pub fn select_closest_cond_frames(
    frame: usize,
    cond_frames: &[usize],
    limit: Option<usize>,
) -> (Vec<usize>, Vec<usize>) {
    let Some(limit) = limit.filter(|&l| cond_frames.len() > l) else {
        return (cond_frames.to_vec(), Vec::new());
    };
    let mut selected = Vec::new();
    if let Some(&before) = cond_frames.iter().filter(|&&t| t < frame).max() {
        selected.push(before);
    }
    if let Some(&after) = cond_frames.iter().filter(|&&t| t >= frame).min() {
        selected.push(after);
    }
    let mut rest: Vec<usize> = cond_frames
        .iter()
        .copied()
        .filter(|t| !selected.contains(t))
        .collect();
    // A stable sort by distance, as Python's `sorted`.
    rest.sort_by_key(|&t| t.abs_diff(frame));
    let remaining = limit.saturating_sub(selected.len());
    selected.extend(rest.into_iter().take(remaining));
    let unselected = cond_frames
        .iter()
        .copied()
        .filter(|t| !selected.contains(t))
        .collect();
    (selected, unselected)
}

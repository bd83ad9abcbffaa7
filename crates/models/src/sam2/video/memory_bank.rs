//! Writing a frame into memory and reading the memory back (`SAM2Base._encode_new_memory` and
//! `_prepare_memory_conditioned_features`, once the frames to attend to are chosen).
//!
//! The bank of a frame is the spatial memories of up to `num_maskmem` frames, each with its
//! sine position encoding plus a learned encoding of its temporal slot (`maskmem_tpos_enc`),
//! followed by the object pointers of up to `max_obj_ptrs_in_encoder` frames, each split into
//! `C / mem_dim` tokens and positioned by a sine encoding of its signed frame distance,
//! projected by `obj_ptr_tpos_proj`.

use burn::tensor::{activation::sigmoid, backend::Backend, DType, Tensor, TensorData};

use super::memory_attention::MemoryBank;
use super::memory_encoder::Memory;
use super::VideoMemoryConfig;
use crate::sam2::neck::sine_position_encoding;
use crate::sam2::{Sam2, Sam2Error};

/// A past frame's memory and its temporal slot: 0 for a prompted (conditioning) frame, else
/// `num_maskmem - frames back` (1 to `num_maskmem - 1`).
#[derive(Debug, Clone)]
pub struct SlottedMemory<'a, B: Backend> {
    /// The temporal slot.
    pub t_pos: usize,
    /// The memory, `[B, mem_dim, h, w]`.
    pub memory: &'a Memory<B>,
}

/// A past frame's object pointer `[B, C]` and its signed distance to the current frame.
#[derive(Debug, Clone)]
pub struct FramePointer<'a, B: Backend> {
    /// `current - past` (negated when tracking backwards).
    pub t_diff: i64,
    /// The pointer.
    pub obj_ptr: &'a Tensor<B, 2>,
}

impl<B: Backend> Sam2<B> {
    /// `_encode_new_memory`: the frame's raw stride-16 features `[B, C, h, w]`, its predicted
    /// high-resolution mask logits `[B, 1, 16h, 16w]` and object scores `[B, 1]` -> its memory.
    /// `mask_from_clicks`: the frame was prompted with clicks, whose masks `config` may ask to
    /// threshold (`binarize_mask_from_pts_for_mem_enc`); otherwise the mask's sigmoid is used.
    pub fn encode_memory(
        &self,
        pix_feat: Tensor<B, 4>,
        pred_masks_high_res: Tensor<B, 4>,
        object_score_logits: Tensor<B, 2>,
        mask_from_clicks: bool,
        config: &VideoMemoryConfig,
    ) -> Result<Memory<B>, Sam2Error> {
        let encoder = self.video_part(&self.memory_encoder, "memory_encoder")?;
        let dtype = pred_masks_high_res.dtype();
        let binarize = mask_from_clicks && config.binarize_mask_from_pts_for_mem_enc;
        let probability = if binarize {
            pred_masks_high_res.greater_elem(0.0).float().cast(dtype)
        } else {
            sigmoid(pred_masks_high_res)
        };
        let mask_for_mem =
            probability * config.sigmoid_scale_for_mem_enc + config.sigmoid_bias_for_mem_enc;
        let mut memory = encoder.forward(pix_feat, mask_for_mem);
        if let Some(no_obj) = &self.no_obj_embed_spatial {
            let [b, mem_dim, h, w] = memory.features.dims();
            let absent = object_score_logits
                .lower_equal_elem(0.0)
                .float()
                .cast(memory.features.dtype());
            let embed = no_obj
                .val()
                .cast(absent.dtype())
                .reshape([1, mem_dim, 1, 1]);
            let added = absent.reshape([b, 1, 1, 1]).repeat_dim(1, mem_dim) * embed;
            memory.features = memory.features + added.repeat_dim(2, h).repeat_dim(3, w);
        }
        Ok(memory)
    }

    /// `_prepare_memory_conditioned_features`: the frame's raw stride-16 features
    /// `[B, C, h, w]` conditioned on its memories and object pointers -> `[B, C, h, w]`.
    /// A frame with neither (the first prompted frame) gets `no_mem_embed` added instead
    /// (`directly_add_no_mem_embed`). `max_obj_ptrs` is `min(frames in the video,
    /// max_obj_ptrs_in_encoder)`: the distance that maps to 1 in the pointers' encoding.
    pub fn condition_on_memory(
        &self,
        pix_feat: Tensor<B, 4>,
        memories: &[SlottedMemory<'_, B>],
        pointers: &[FramePointer<'_, B>],
        max_obj_ptrs: usize,
    ) -> Result<Tensor<B, 4>, Sam2Error> {
        let [b, c, h, w] = pix_feat.dims();
        let dtype = pix_feat.dtype();
        let device = pix_feat.device();
        if memories.is_empty() && pointers.is_empty() {
            let embed = self
                .no_mem_embed
                .as_ref()
                .ok_or_else(|| Sam2Error::Config("this model has no `no_mem_embed`".to_string()))?;
            return Ok(pix_feat + embed.val().cast(dtype).reshape([1, c, 1, 1]));
        }
        let attention = self.video_part(&self.memory_attention, "memory_attention")?;
        let tpos = self
            .video_part(&self.maskmem_tpos_enc, "maskmem_tpos_enc")?
            .val();
        let [num_maskmem, _, _, mem_dim] = tpos.dims();
        let tokens = |t: Tensor<B, 4>| {
            let [n, ch, hh, ww] = t.dims();
            t.reshape([n, ch, hh * ww]).swap_dims(1, 2)
        };
        let (mut memory, mut memory_pos) = (Vec::new(), Vec::new());
        for entry in memories {
            let slot = num_maskmem.checked_sub(entry.t_pos + 1).ok_or_else(|| {
                Sam2Error::shape(format!(
                    "temporal slot {} is beyond num_maskmem ({num_maskmem})",
                    entry.t_pos
                ))
            })?;
            let slot_enc = tpos
                .clone()
                .narrow(0, slot, 1)
                .reshape([1, 1, mem_dim])
                .cast(dtype);
            memory.push(tokens(entry.memory.features.clone()));
            memory_pos.push(tokens(entry.memory.pos_enc.clone()) + slot_enc);
        }
        let num_obj_ptr_tokens = if pointers.is_empty() {
            0
        } else {
            let (ptr_tokens, ptr_pos) =
                self.pointer_tokens(pointers, max_obj_ptrs, [b, c], dtype)?;
            let count = ptr_tokens.dims()[1];
            memory.push(ptr_tokens);
            memory_pos.push(ptr_pos);
            count
        };
        let bank = MemoryBank {
            memory: Tensor::cat(memory, 1),
            memory_pos: Tensor::cat(memory_pos, 1),
            num_obj_ptr_tokens,
        };
        let curr_pos = sine_position_encoding::<B>(c, [h, w], &device)
            .cast(dtype)
            .reshape([1, c, h * w])
            .swap_dims(1, 2)
            .repeat_dim(0, b);
        let conditioned = attention.forward(tokens(pix_feat), curr_pos, [h, w], &bank)?;
        Ok(conditioned.swap_dims(1, 2).reshape([b, c, h, w]))
    }

    /// The pointers as memory tokens `[B, P·C/mem_dim, mem_dim]` and their positions.
    fn pointer_tokens(
        &self,
        pointers: &[FramePointer<'_, B>],
        max_obj_ptrs: usize,
        [b, c]: [usize; 2],
        dtype: DType,
    ) -> Result<(Tensor<B, 3>, Tensor<B, 3>), Sam2Error> {
        let projection = self.video_part(&self.obj_ptr_tpos_proj, "obj_ptr_tpos_proj")?;
        let mem_dim = projection.d_output();
        let split = c / mem_dim;
        let count = pointers.len();
        let device = pointers[0].obj_ptr.device();
        // [P, B, C] -> [B, P, split, mem_dim] -> [B, P·split, mem_dim]: token p·split + j holds
        // channels j·mem_dim.. of pointer p.
        let stacked: Vec<Tensor<B, 3>> = pointers
            .iter()
            .map(|p| p.obj_ptr.clone().cast(dtype).reshape([b, 1, c]))
            .collect();
        let ptr_tokens = Tensor::cat(stacked, 1).reshape([b, count * split, mem_dim]);
        let distances: Vec<i64> = pointers.iter().map(|p| p.t_diff).collect();
        let encoding = pointer_distance_encoding::<B>(&distances, max_obj_ptrs, c, dtype, &device);
        let positions = projection.forward(encoding); // [P, mem_dim]
        let positions = positions
            .reshape([1, count, 1, mem_dim])
            .repeat_dim(2, split)
            .repeat_dim(0, b)
            .reshape([b, count * split, mem_dim]);
        Ok((ptr_tokens, positions))
    }
}

/// `get_1d_sine_pe(t_diff / (max_obj_ptrs - 1), dim)`: `[P, dim]`, sines then cosines. In f32
/// the arithmetic is the official f32 one; only sin/cos are evaluated in f64 and rounded.
fn pointer_distance_encoding<B: Backend>(
    distances: &[i64],
    max_obj_ptrs: usize,
    dim: usize,
    dtype: DType,
    device: &B::Device,
) -> Tensor<B, 2> {
    let half = dim / 2;
    // One frame in the whole video never reads pointers; keep the divisor positive anyway.
    let t_diff_max = max_obj_ptrs.saturating_sub(1).max(1);
    let wide = dtype == DType::F64;
    let mut values = vec![0f64; distances.len() * dim];
    for (row, &t_diff) in distances.iter().enumerate() {
        for i in 0..half {
            let angle = if wide {
                let position = t_diff as f64 / t_diff_max as f64;
                position / 10000f64.powf((2 * (i / 2)) as f64 / half as f64)
            } else {
                let position = t_diff as f32 / t_diff_max as f32;
                let divisor = 10000f32.powf((2 * (i / 2)) as f32 / half as f32);
                (position / divisor) as f64
            };
            values[row * dim + i] = angle.sin();
            values[row * dim + half + i] = angle.cos();
        }
    }
    let data = TensorData::new(values, [distances.len(), dim]);
    // Straight into `dtype`: through f32 an f64 model would lose the f64 values.
    Tensor::<B, 2>::from_data(data, (device, dtype))
}

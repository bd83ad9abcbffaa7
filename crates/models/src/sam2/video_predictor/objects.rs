//! What the video predictor remembers about each object: its prompts per frame, and its
//! outputs per frame, split as upstream into conditioning frames (prompted) and the others
//! (tracked), plus the outputs of prompts not yet propagated.

use burn::tensor::{backend::Backend, Tensor};

use crate::sam2::video::Memory;
use crate::sam2::PointPrompts;

/// Frame-indexed values in insertion order (upstream's `dict`s: the order decides the order
/// of the memories in the bank, hence the summation order of the attention).
#[derive(Debug, Clone)]
pub struct FrameMap<T> {
    entries: Vec<(usize, T)>,
}

impl<T> Default for FrameMap<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<T> FrameMap<T> {
    /// The value of `frame`.
    pub fn get(&self, frame: usize) -> Option<&T> {
        self.entries
            .iter()
            .find(|(f, _)| *f == frame)
            .map(|(_, v)| v)
    }

    /// Whether `frame` has a value.
    pub fn contains(&self, frame: usize) -> bool {
        self.get(frame).is_some()
    }

    /// Sets `frame`'s value; an existing frame keeps its place.
    pub fn insert(&mut self, frame: usize, value: T) {
        match self.entries.iter_mut().find(|(f, _)| *f == frame) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((frame, value)),
        }
    }

    /// Removes and returns `frame`'s value.
    pub fn remove(&mut self, frame: usize) -> Option<T> {
        let position = self.entries.iter().position(|(f, _)| *f == frame)?;
        Some(self.entries.remove(position).1)
    }

    /// `(frame, value)` in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.entries.iter().map(|(f, v)| (*f, v))
    }

    /// The frames, in insertion order.
    pub fn frames(&self) -> impl Iterator<Item = usize> + '_ {
        self.entries.iter().map(|(f, _)| *f)
    }

    /// Whether no frame has a value.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes every entry out, in insertion order.
    pub fn drain(&mut self) -> Vec<(usize, T)> {
        std::mem::take(&mut self.entries)
    }
}

/// One object's prediction on one frame (upstream's compact `current_out`).
#[derive(Debug, Clone)]
pub struct FrameOutput<B: Backend> {
    /// The frame's memory, once encoded (features rounded to bf16 as upstream stores them).
    pub memory: Option<Memory<B>>,
    /// `[1, 1, 4h, 4w]`: the mask logits at the decoder's resolution.
    pub pred_masks: Tensor<B, 4>,
    /// `[1, C]`: the object pointer.
    pub obj_ptr: Tensor<B, 2>,
    /// `[1, 1]`: positive when the object is present.
    pub object_score_logits: Tensor<B, 2>,
}

/// Outputs split as upstream's `output_dict`.
#[derive(Debug, Clone)]
pub struct FrameOutputs<B: Backend> {
    /// Prompted frames (their memories have temporal slot 0).
    pub cond: FrameMap<FrameOutput<B>>,
    /// Tracked frames.
    pub non_cond: FrameMap<FrameOutput<B>>,
}

impl<B: Backend> Default for FrameOutputs<B> {
    fn default() -> Self {
        Self {
            cond: FrameMap::default(),
            non_cond: FrameMap::default(),
        }
    }
}

impl<B: Backend> FrameOutputs<B> {
    /// The map of conditioning or of tracked frames.
    pub fn map_mut(&mut self, cond: bool) -> &mut FrameMap<FrameOutput<B>> {
        if cond {
            &mut self.cond
        } else {
            &mut self.non_cond
        }
    }

    /// The map of conditioning or of tracked frames.
    pub fn map(&self, cond: bool) -> &FrameMap<FrameOutput<B>> {
        if cond {
            &self.cond
        } else {
            &self.non_cond
        }
    }
}

/// Clicks of one frame in the model's input pixels: `[1, N, 2]`, labels `[1, N]` (a box is
/// its two corners, labels 2 and 3, first).
pub type FrameClicks<B> = PointPrompts<B>;

/// Everything about one object.
#[derive(Debug, Clone)]
pub struct ObjectState<B: Backend> {
    /// The caller's id.
    pub id: u32,
    /// Clicks (and box) per frame.
    pub clicks: FrameMap<FrameClicks<B>>,
    /// Mask prompts per frame, `[1, 1, S, S]` at the model's input size.
    pub masks: FrameMap<Tensor<B, 4>>,
    /// Propagated outputs.
    pub outputs: FrameOutputs<B>,
    /// Outputs of prompts added since the last propagation.
    pub pending: FrameOutputs<B>,
    /// Frames tracked so far, and whether backwards.
    pub tracked: FrameMap<bool>,
}

impl<B: Backend> ObjectState<B> {
    /// A new object without prompts.
    pub fn new(id: u32) -> Self {
        Self {
            id,
            clicks: FrameMap::default(),
            masks: FrameMap::default(),
            outputs: FrameOutputs::default(),
            pending: FrameOutputs::default(),
            tracked: FrameMap::default(),
        }
    }

    /// The latest output of `frame`: a pending one of the given kind, else a propagated one.
    pub fn latest_output(&self, frame: usize, cond: bool) -> Option<&FrameOutput<B>> {
        self.pending
            .map(cond)
            .get(frame)
            .or_else(|| self.outputs.cond.get(frame))
            .or_else(|| self.outputs.non_cond.get(frame))
    }
}

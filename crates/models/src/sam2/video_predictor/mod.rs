//! Tracking objects through a video with SAM 2.1 (the official `SAM2VideoPredictor`): prompts
//! (clicks, a box or a mask) on any frame for one or more objects, then propagation forward or
//! backward, each frame attending to the memories of the prompted frames and of the frames
//! just tracked.
//!
//! ```no_run
//! # use burn::backend::{flex::FlexDevice, Flex};
//! # use burn::tensor::Tensor;
//! # use segburn_models::sam2::{HieraSize, Sam2Config};
//! # use segburn_models::sam2::video_predictor::{Sam2VideoPredictor, VideoPredictorConfig, ObjectPrompt};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let device = FlexDevice;
//! let config = Sam2Config::sam2_1_hiera_video(HieraSize::Tiny);
//! let model = config.init::<Flex>(&device);
//! let frames: Vec<Tensor<Flex, 4>> = vec![]; // [1, 3, 1024, 1024] each, normalised
//! let mut predictor = Sam2VideoPredictor::new(&model, &config, VideoPredictorConfig::new(), frames, [480, 854])?;
//! predictor.add_prompt(0, 1, ObjectPrompt::clicks(vec![[210.0, 350.0]], vec![1]))?;
//! for frame in predictor.propagate(None, None, false)? {
//!     println!("frame {}: {:?}", frame.frame, frame.logits.dims());
//! }
//! # Ok(()) }
//! ```

mod holes;
mod objects;
mod prompts;
mod propagate;
mod track;

use burn::config::Config;
use burn::tensor::{backend::Backend, DType, Tensor};

pub use holes::fill_holes;
pub use objects::{FrameOutput, FrameOutputs, ObjectState};
pub use prompts::ObjectPrompt;
pub use track::select_closest_cond_frames;

use crate::sam2::video::VideoMemoryConfig;
use crate::sam2::{ImageFeatures, Sam2, Sam2Config, Sam2Error};

/// The predictor's settings (the official video predictor's values by default).
#[derive(Config, Debug)]
pub struct VideoPredictorConfig {
    /// Background holes of at most this many pixels in a low-resolution mask become
    /// foreground (`fill_hole_area`; the official builder sets 8, but without the CUDA
    /// extension the official code skips the step, as with 0).
    #[config(default = 8)]
    pub fill_hole_area: usize,
    /// Multimask output (3 masks, best IoU kept) on the first prompt of a frame…
    #[config(default = true)]
    pub multimask_output_in_sam: bool,
    /// …and while tracking…
    #[config(default = true)]
    pub multimask_output_for_tracking: bool,
    /// …when the frame has between these many clicks (a box counts 2).
    #[config(default = 0)]
    pub multimask_min_pt_num: usize,
    /// See `multimask_min_pt_num`.
    #[config(default = 1)]
    pub multimask_max_pt_num: usize,
    /// At most this many prompted frames in a frame's memory (`None`: all).
    #[config(default = "None")]
    pub max_cond_frames_in_attn: Option<usize>,
    /// Tracked frames in memory are this far apart (the last one is always the previous frame).
    #[config(default = 1)]
    pub memory_temporal_stride_for_eval: usize,
    /// A correction on a tracked frame makes it a prompted frame.
    #[config(default = false)]
    pub add_all_frames_to_correct_as_cond: bool,
    /// Image features of this many frames are kept (upstream keeps the last one).
    #[config(default = 1)]
    pub cached_frames: usize,
    /// In the masks returned, each pixel stays positive for one object at most: the others'
    /// logits there are clamped to −10 (`non_overlap_masks`).
    #[config(default = false)]
    pub non_overlap_masks: bool,
}

/// `_apply_non_overlapping_constraints` on `[objects, 1, H, W]` logits: where an object's
/// logit is not the highest, it is clamped to at most −10.
pub fn non_overlapping<B: Backend>(logits: Tensor<B, 4>) -> Tensor<B, 4> {
    let [objects, _, h, w] = logits.dims();
    if objects <= 1 {
        return logits;
    }
    let device = logits.device();
    let best = logits.clone().argmax(0).expand([objects, 1, h, w]);
    let index = Tensor::<B, 1, burn::tensor::Int>::arange(0..objects as i64, &device)
        .reshape([objects, 1, 1, 1])
        .expand([objects, 1, h, w]);
    let clamped = logits.clone().clamp_max(-10.0);
    logits.mask_where(best.not_equal(index), clamped)
}

/// Where the predictor gets its frames: `[1, 3, S, S]` each, normalised as the model expects.
/// A `Vec` of tensors holds the whole video; a source that prepares each frame when asked
/// keeps only the compact originals (the image encoder reads each frame once per pass).
pub trait FrameSource<B: Backend> {
    /// Number of frames.
    fn frame_count(&self) -> usize;
    /// Frame `index` (`< frame_count()`).
    fn frame(&self, index: usize) -> Result<Tensor<B, 4>, Sam2Error>;
}

impl<B: Backend> FrameSource<B> for Vec<Tensor<B, 4>> {
    fn frame_count(&self) -> usize {
        Vec::len(self)
    }

    fn frame(&self, index: usize) -> Result<Tensor<B, 4>, Sam2Error> {
        self.get(index)
            .cloned()
            .ok_or_else(|| Sam2Error::prompt(format!("frame {index} of {}", Vec::len(self))))
    }
}

/// The masks of every object on one frame.
#[derive(Debug, Clone)]
pub struct FrameMasks<B: Backend> {
    /// The frame's index.
    pub frame: usize,
    /// The objects, in the order they were first prompted.
    pub object_ids: Vec<u32>,
    /// `[objects, 1, H, W]` mask logits at the video's resolution (> 0: inside).
    pub logits: Tensor<B, 4>,
}

/// A video being segmented: its frames, their cached features and every object's prompts and
/// outputs (the official `inference_state`).
pub struct Sam2VideoPredictor<'m, B: Backend> {
    model: &'m Sam2<B>,
    video_config: VideoMemoryConfig,
    settings: VideoPredictorConfig,
    /// The frames, `[1, 3, S, S]` each, normalised.
    frames: Box<dyn FrameSource<B> + 'm>,
    /// Where the frames and the model live, and the frames' float type.
    device: B::Device,
    dtype: DType,
    /// `[H, W]` of the original frames.
    video_size: [usize; 2],
    /// The model's input size `S`.
    image_size: [usize; 2],
    /// Raw stride-16 features (no memory) and projected high-res levels, most recent last.
    cache: Vec<(usize, ImageFeatures<B>)>,
    objects: Vec<ObjectState<B>>,
}

impl<'m, B: Backend> Sam2VideoPredictor<'m, B> {
    /// A predictor on `frames` (`[1, 3, S, S]` each, normalised as the model expects; `S` the
    /// model's input size) of a video of `video_size` `[H, W]` pixels. `model` must have been
    /// built from `config`, with an image encoder and the video memory.
    pub fn new(
        model: &'m Sam2<B>,
        config: &Sam2Config,
        settings: VideoPredictorConfig,
        frames: impl FrameSource<B> + 'm,
        video_size: [usize; 2],
    ) -> Result<Self, Sam2Error> {
        let video_config = config.video.clone().ok_or_else(|| {
            Sam2Error::Config("the video predictor needs a model with `video: Some(...)`".into())
        })?;
        if model.image_encoder.is_none() || model.memory_attention.is_none() {
            return Err(Sam2Error::Config(
                "the video predictor needs a model with an image encoder and the video memory"
                    .into(),
            ));
        }
        if frames.frame_count() == 0 {
            return Err(Sam2Error::prompt("the video has no frames"));
        }
        if video_size.contains(&0) {
            return Err(Sam2Error::shape(format!("video size {video_size:?}")));
        }
        let image_size = config.prompt_encoder.input_image_size;
        let first = frames.frame(0)?;
        let (device, dtype) = (first.device(), first.dtype());
        let mut predictor = Self {
            model,
            video_config,
            settings,
            frames: Box::new(frames),
            device,
            dtype,
            video_size,
            image_size,
            cache: Vec::new(),
            objects: Vec::new(),
        };
        // As upstream's `init_state`: frame 0's features are computed (and its shape checked).
        predictor.frame_features(0)?;
        Ok(predictor)
    }

    /// Number of frames.
    pub fn num_frames(&self) -> usize {
        self.frames.frame_count()
    }

    /// Every object's masks on a frame at the video's resolution, as returned (the
    /// non-overlap rule applied when configured).
    fn returned(&self, logits: Tensor<B, 4>) -> Tensor<B, 4> {
        if self.settings.non_overlap_masks {
            non_overlapping(logits)
        } else {
            logits
        }
    }

    /// The video's `[H, W]`.
    pub fn video_size(&self) -> [usize; 2] {
        self.video_size
    }

    /// The objects' ids, in the order they were first prompted.
    pub fn object_ids(&self) -> Vec<u32> {
        self.objects.iter().map(|o| o.id).collect()
    }

    /// Everything stored about object `id`.
    pub fn object(&self, id: u32) -> Option<&ObjectState<B>> {
        self.objects.iter().find(|o| o.id == id)
    }

    /// The settings, to change between calls (as upstream's attributes, e.g.
    /// `add_all_frames_to_correct_as_cond`).
    pub fn settings_mut(&mut self) -> &mut VideoPredictorConfig {
        &mut self.settings
    }

    /// Forgets every object and prompt (the frames' features stay cached).
    pub fn reset(&mut self) {
        self.objects.clear();
    }

    /// The frame's raw features, from the cache or the image encoder.
    fn frame_features(&mut self, frame: usize) -> Result<ImageFeatures<B>, Sam2Error> {
        if let Some((_, features)) = self.cache.iter().find(|(f, _)| *f == frame) {
            return Ok(features.clone());
        }
        if frame >= self.frames.frame_count() {
            return Err(Sam2Error::prompt(format!(
                "frame {frame} does not exist ({} frames)",
                self.frames.frame_count()
            )));
        }
        let image = self.frames.frame(frame)?;
        let [n, c, h, w] = image.dims();
        if [n, c, h, w] != [1, 3, self.image_size[0], self.image_size[1]] {
            return Err(Sam2Error::shape(format!(
                "frame {frame} is {:?}, the model takes [1, 3, {}, {}]",
                [n, c, h, w],
                self.image_size[0],
                self.image_size[1]
            )));
        }
        let encoder = self
            .model
            .image_encoder
            .as_ref()
            .ok_or(Sam2Error::NoImageEncoder)?;
        let backbone = encoder.forward(image)?;
        let high_res = self
            .model
            .sam_mask_decoder
            .project_high_res(backbone.stride4, backbone.stride8);
        let features = ImageFeatures {
            image_embed: backbone.stride16,
            high_res,
        };
        self.cache.push((frame, features.clone()));
        let keep = self.settings.cached_frames.max(1);
        if self.cache.len() > keep {
            self.cache.drain(..self.cache.len() - keep);
        }
        Ok(features)
    }

    /// The index of object `id`, added if new.
    fn object_index(&mut self, id: u32) -> usize {
        match self.objects.iter().position(|o| o.id == id) {
            Some(index) => index,
            None => {
                self.objects.push(ObjectState::new(id));
                self.objects.len() - 1
            }
        }
    }
}

#[cfg(test)]
mod tests;

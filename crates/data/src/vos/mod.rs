//! Video object segmentation (VOS) data for SAM 2.1 in the DAVIS / MOSE / SA-V layout:
//!
//! ```text
//! <root>/JPEGImages/<video>/<frame>.jpg|.png   the frames, sorted by file name
//! <root>/Annotations/<video>/<frame>.png       palette or 8-bit grey: 0 background,
//!                                              1..=254 object ids, 255 void
//! <root>/ImageSets/<split>.txt                 optional: one video name per line
//! ```
//!
//! Frames and annotations pair by file stem; a frame may lack an annotation (MOSE and SA-V
//! validation annotate only some), a video must have at least one annotated frame. A video's
//! objects are the ids of its first annotated frame (the semi-supervised protocol);
//! [`VosVideo::all_object_ids`] reads every annotation for all the ids that occur.
//!
//! ```no_run
//! use segburn_data::vos::{ClipConfig, VosDataset, VosIndex, VosLayout};
//! # fn main() -> Result<(), segburn_data::vos::VosError> {
//! let layout = VosLayout::new("datasets/sample_vos");
//! let index = VosIndex::new(&layout, Some("train"))?;
//! let clips = ClipConfig { num_frames: 8, max_num_objects: 3, reverse_time_prob: 0.0 };
//! let train = VosDataset::new(index, clips, 7)?;
//! for position in 0..train.len() {
//!     let clip = train.train_clip(0, position)?;
//!     // clip.images [T, H, W, 3] RGB, clip.masks [T, K, H, W] 0/1, clip.object_ids [K]
//! #   let _ = clip;
//! }
//! # Ok(()) }
//! ```
//!
//! Training clips follow the official SAM 2 `RandomUniformSampler` (see [`sample_clip`]);
//! a clip is a pure function of `(seed, epoch, video)`, so [`VosLoader`] yields the same clips
//! for any number of worker threads.

mod annotation;
mod clip;
mod config;
mod dataset;
mod error;
mod loader;
mod sampler;
mod scan;

pub use annotation::{read_annotation, Annotation, BACKGROUND, VOID};
pub use clip::{read_clip, VosClip};
pub use config::{ClipConfig, VosLayout};
pub use dataset::VosDataset;
pub use error::VosError;
pub use loader::{VosEpochIter, VosLoader};
pub use sampler::{sample_clip, ClipPlan, MAX_TRIES};
pub use scan::{VosFrame, VosIndex, VosVideo};

#[cfg(test)]
mod tests;

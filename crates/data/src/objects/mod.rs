//! Objects for promptable (SAM2-style) segmentation: each image with a set of binary object
//! masks, at the model's square input size.
//!
//! Objects come from
//! * the connected components of each class of any semantic layout ([`ObjectSource::SemanticComponents`],
//!   with a minimum area and 4- or 8-connectivity),
//! * instance maps, one value per object ([`ObjectSource::InstanceMasks`]),
//! * folders of per-object mask PNGs ([`ObjectSource::ObjectMaskFolders`]).
//!
//! With [`ObjectDataConfig::embeddings`] set, every image needs a cached embedding file
//! `<name>.safetensors` (`image_embed [256, h, w]`, `feat_s0 [32, 4h, 4w]`, `feat_s1 [64, 2h, 2w]`)
//! and the images themselves are not decoded: the decoder trains with the encoder absent.
//! This crate only finds those files; the trainer reads them.
//!
//! ```no_run
//! use segburn_data::objects::{ObjectDataConfig, ObjectDataset, ObjectLoader};
//! # fn main() -> Result<(), segburn_data::objects::ObjectError> {
//! let config = ObjectDataConfig::default(); // the bundled sample, objects from its labels
//! let train = ObjectDataset::new(&config, &config.train_split, 128, 7)?;
//! let loader = ObjectLoader::new(train, config.prefetch);
//! for batch in loader.epoch_iter(0, 0) {
//!     let batch = batch?; // images [N, 3, 128, 128], masks [K, 128, 128], object_image [K]
//! #   let _ = batch;
//! }
//! # Ok(()) }
//! ```
//!
//! Determinism: the image order of epoch `e` is the data crate's permutation of `(seed, e)`;
//! image `i` draws its flip and then its objects from `SplitMix64::for_sample(seed, e, i)`.

mod components;
mod config;
mod dataset;
mod error;
mod index;
mod loader;
mod mask;
mod read;

pub use components::{connected_components, Connectivity};
pub use config::{ObjectDataConfig, ObjectSource};
pub use dataset::{ObjectBatch, ObjectDataset, ObjectSample};
pub use error::ObjectError;
pub use index::{path_for_split, ObjectEntry, ObjectFiles, ObjectIndex};
pub use loader::{ObjectEpochIter, ObjectLoader};
pub use mask::{ObjectMask, PixelBox};
pub use read::{read_id_map, IdMap};

#[cfg(test)]
mod tests;

//! # segburn-data
//!
//! Datasets, label maps, decoding, augmentation and the threaded, deterministic loader of
//! segburn. Nothing here knows Burn tensors: a [`Batch`] holds contiguous `f32`/`u8` buffers that
//! the trainer uploads in one call each.
//!
//! ## From files to batches
//! ```no_run
//! use segburn_data::{DataConfig, DatasetIndex, Loader, Mode};
//!
//! # fn main() -> Result<(), segburn_data::DataError> {
//! let config = DataConfig::default(); // normally the `data` part of the RON experiment
//! let train = DatasetIndex::new(&config.layout, &config.train_split, config.ignore_index)?;
//! let loader = Loader::new(train, &config, Mode::Train, 304)?;
//! let (epoch, start_batch) = (0, 0); // a resumed run passes its saved position
//! for batch in loader.epoch_iter(epoch, start_batch) {
//!     let batch = batch?; // an error names the file that caused it
//!     let [n, c, h, w] = batch.image_shape(); // images: [N, 3, H, W] normalised RGB
//!     // labels: [N, H, W] trainIds or 255; edges: [N, H, W] 0/1; batch.names; batch.index
//! #   let _ = (n, c, h, w);
//! }
//! # let _ = loader.batches_per_epoch();
//! # Ok(())
//! # }
//! ```
//!
//! * [`DatasetIndex::new`] scans a split of a [`Layout`] (Cityscapes, CamVid, ADE20K, Pascal
//!   VOC 2012, a list file, a folder pair) into `(image, label, name)` entries sorted by path;
//!   it implements `burn_dataset::Dataset<SampleEntry>`. Index masks map their stored values
//!   to classes through a [`ValueMap`] (as stored, `Binary` for 0/255 masks, or an explicit
//!   `Map`) and optionally `reduce_zero_label`.
//! * [`Loader::new`] takes the index, the [`DataConfig`], a [`Mode`] and a seed.
//!   [`Loader::epoch_iter`]`(epoch, start_batch)` yields `Result<Batch, DataError>` in order,
//!   built by `num_workers` threads behind a bounded queue; [`Loader::batches_per_epoch`] says
//!   how many there are. `Mode::Validation` yields the same [`Batch`] at full resolution without
//!   augmentation (batch size 1 allows mixed image sizes).
//! * [`scan_split`] scans a whole split and reports every problem and the class frequencies;
//!   [`class_pixel_counts`] counts the class pixels alone (for class weights from the data).
//! * [`vos`] reads videos for video object segmentation (DAVIS / MOSE / SA-V layout) and draws
//!   SAM 2 training clips from them; [`objects`] makes promptable objects from images.
//!
//! ## Determinism
//! The order of epoch `e` is a Fisher–Yates permutation drawn from `(seed, e)`, and sample `i`
//! of the dataset is augmented with a generator seeded from `(seed, e, i)` ([`rng`], SplitMix64,
//! owned by this crate so no dependency update can change a batch). A batch is therefore a pure
//! function of `(seed, epoch, batch index)`: identical bit for bit for 1 or 16 workers, and a
//! loader started at `(epoch, batch)` yields exactly the batches an uninterrupted run would.
//!
//! ## Errors
//! Every failure is a [`DataError`] naming the file (full path) and the numbers involved: a
//! missing label, an unreadable or truncated image, an image/label size mismatch, label values
//! that are neither a class nor the ignore index (each value and its pixel count), an empty
//! split. An error in a worker ends the epoch iterator with that error; it never hangs and never
//! drops a sample silently. Dropping the iterator stops and joins the workers.

pub mod augment;
pub mod config;
pub mod decode;
pub mod edges;
pub mod label_ids;
pub mod labels;
pub mod layout;
pub mod objects;
pub mod rng;
pub mod value_map;
pub mod vos;

mod batch;
mod canny;
mod error;
mod index;
mod jpeg;
mod known_classes;
mod loader;
mod orientation;
mod pillow_resize;
mod pipeline;
mod pixels;
mod scan;

pub use batch::Batch;
pub use config::{
    AugmentConfig, DataConfig, EdgeConfig, EdgeRule, LoaderConfig, Mode, ValLoaderConfig,
};
pub use error::{BadValues, DataError, LabelValue};
pub use index::DatasetIndex;
pub use labels::{pascal_voc_palette, LabelEncoding, LabelMap};
pub use layout::{Layout, SampleEntry};
pub use loader::{panic_message, EpochIter, Loader};
pub use pillow_resize::{resize_rgb8, PillowFilter, PillowResizeError};
pub use pipeline::{Decoded, Pipeline, Sample};
pub use scan::{class_pixel_counts, scan_split, SplitScan};
pub use value_map::{ValueMap, ValueTarget};

#[cfg(test)]
mod test_support;

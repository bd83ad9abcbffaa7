//! "Segment everything": the official `SAM2AutomaticMaskGenerator` on top of
//! [`super::Sam2ImagePredictor`].
//!
//! A grid of single clicks covers the image (and, with `crop_n_layers > 0`, overlapping crops
//! of it); each click gives three masks; masks with a low predicted IoU or stability score,
//! or cut by a crop edge, are dropped; box NMS removes duplicates within a crop and then across
//! crops. Optional steps: small holes and islands removed from the low-resolution logits
//! (`min_mask_region_area`), one refinement of every mask by its own logits (`use_m2m`). The
//! order of operations and every rounding follow upstream's `sam2/automatic_mask_generator.py`
//! and `sam2/utils/amg.py`; `tests/sam2_automatic.rs` compares whole runs with the official
//! generator (`tests/fixtures/sam2_automatic/`).
//!
//! ```no_run
//! # use burn::backend::{flex::FlexDevice, Flex};
//! # use segburn_models::sam2::{automatic::*, HieraSize, Sam2Config};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let device = FlexDevice;
//! # let model = Sam2Config::sam2_1_hiera(HieraSize::Small).init::<Flex>(&device);
//! # let (rgb, size) = (vec![0u8; 48 * 64 * 3], [48, 64]);
//! let generator = AutomaticMaskGenerator::new(&model, AutomaticMaskGeneratorConfig::new())?;
//! for record in generator.generate(&rgb, size, &device)? {
//!     println!("{:?} area {} iou {:.3}", record.bbox, record.area, record.predicted_iou);
//! }
//! # Ok(()) }
//! ```
//!
//! Not yet: explicit `point_grids` (upstream's alternative to `points_per_side`).

mod batch;
mod clicks;
mod config;
pub mod crops;
mod generator;
pub mod grid;
pub mod mask;
pub mod nms;
pub mod regions;
pub mod rle;
pub mod stability;

pub use config::AutomaticMaskGeneratorConfig;
pub use generator::{AutomaticMaskGenerator, MaskRecord};
pub use mask::BinaryMask;
pub use rle::{Rle, RleError};
pub use stability::stability_scores;

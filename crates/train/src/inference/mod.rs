//! Inference modes and the evaluation of a validation split.
//!
//! * [`InferenceConfig`]: whole image (the official evaluation: main head, bilinear upsampling
//!   with `align_corners = true`), sliding window (crop + stride, overlapping logits averaged),
//!   multi-scale (resize the input, run, resize the logits back, average) and horizontal flip
//!   (average with the flipped image's logits), in any combination.
//! * [`predict_logits`]: full-resolution class scores `[N, K, H, W]` of one batch, on any Burn
//!   backend, for any image size (windows are padded to multiples of 8 and cropped back).
//! * [`Evaluator`]: runs a validation loader through [`predict_logits`] into a
//!   [`ConfusionMatrix`](crate::metric::ConfusionMatrix), reporting each batch's prediction to a
//!   callback (progress bars, saving pictures).
//!
//! ```no_run
//! # use burn::backend::Flex;
//! # use segburn_models::pidnet::{PidNetConfig, PidNetSize};
//! use segburn_train::inference::{predict_logits, InferenceConfig, InferenceMode};
//! # let device = Default::default();
//! # let model = PidNetConfig::new(PidNetSize::S, 19).init::<Flex>(&device);
//! # let images = burn::tensor::Tensor::<Flex, 4>::zeros([1, 3, 64, 64], &device);
//! let config = InferenceConfig {
//!     mode: InferenceMode::Slide { crop: [512, 512], stride: [341, 341] },
//!     scales: vec![0.75, 1.0, 1.25],
//!     flip: true,
//!     ..InferenceConfig::default()
//! };
//! let logits = predict_logits(&model, images, &config)?; // [N, K, H, W], f32
//! # Ok::<(), segburn_train::inference::InferenceError>(())
//! ```

mod config;
mod error;
mod evaluator;
mod modes;
mod net;
mod windows;

pub use config::{InferenceConfig, InferenceMode};
pub use error::InferenceError;
pub use evaluator::{CallbackError, EvalStep, Evaluator};
pub use modes::{predict_classes, predict_logits};
pub use net::SegmentationNet;
pub use windows::{padded_to_multiple, window_starts, Window};

#[cfg(test)]
mod tests;

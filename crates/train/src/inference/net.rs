//! What the inference modes need from a network.

use burn::tensor::{backend::Backend, Tensor};
use segburn_models::pidnet::{PidNet, PidNetError};

/// A segmentation network that maps an image batch to class logits at a fixed output stride.
/// `Sync`: the modes run it on a compute-pool thread.
pub trait SegmentationNet<B: Backend>: Sync {
    /// `[N, 3, H, W] -> [N, K, H/s, W/s]` with `s` = [`output_stride`](Self::output_stride);
    /// `H` and `W` are multiples of [`input_multiple`](Self::input_multiple).
    fn logits(&self, images: Tensor<B, 4>) -> Result<Tensor<B, 4>, PidNetError>;

    /// Input sizes must be multiples of this.
    fn input_multiple(&self) -> usize;
}

impl<B: Backend> SegmentationNet<B> for PidNet<B> {
    /// The main head of the inference graph (the official `OUTPUT_INDEX = 1`).
    fn logits(&self, images: Tensor<B, 4>) -> Result<Tensor<B, 4>, PidNetError> {
        self.infer(images)
    }

    fn input_multiple(&self) -> usize {
        8
    }
}

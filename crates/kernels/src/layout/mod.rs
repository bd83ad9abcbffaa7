//! The layout family: copies that move values without arithmetic. A permuted view copied into
//! a row-major buffer (`permute.rs`: Hiera's window partitions and head splits, which Flex
//! walks element by element on one thread), and the block-to-space copy that makes a
//! transposed convolution whose kernel equals its stride a matrix product
//! (`blocks_to_space.rs`).

mod autodiff;
mod blocks_to_space;
mod flex;
mod permute;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;

pub(crate) use autodiff::blocks_to_space_tracked;
pub use blocks_to_space::{blocks_to_space, space_to_blocks, Blocks};
pub use permute::{copy_strided, inverse_axes};

use crate::dispatch::{flex_primitive, from_flex, route, same_backend, Route};

/// The layout kernels of a backend.
pub trait LayoutKernels: Backend {
    /// `x.permute(axes)` copied into a row-major buffer.
    fn permuted_copy(x: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;

    /// `[N, C·k·k, H, W] -> [N, C, k·H, k·W]`: channel `(c, i, j)` at `(y, x)` to pixel
    /// `(k·y + i, k·x + j)` of channel `c`.
    fn blocks_to_space(x: FloatTensor<Self>, block: usize) -> FloatTensor<Self>;

    /// The inverse of [`LayoutKernels::blocks_to_space`] (its gradient).
    fn space_to_blocks(x: FloatTensor<Self>, block: usize) -> FloatTensor<Self>;
}

/// `x.permute(axes)`, made row-major: on the CPU in f32/f64 by our copy ([`copy_strided`]; in
/// training its gradient is the inverse permutation, copied the same way), so that the
/// reshapes that follow are free; elsewhere Burn's permuted view (copied by whatever reads it).
pub fn permute<B: Backend, const D: usize>(x: Tensor<B, D>, axes: [usize; D]) -> Tensor<B, D> {
    match route::<B>(x.dtype()) {
        Route::Burn => x.permute(axes),
        Route::OwnInference => from_flex(Flex::permuted_copy(flex_primitive(x), &axes)),
        Route::OwnTraining => {
            same_backend(autodiff::permute_tracked::<Flex, D>(same_backend(x), axes))
        }
    }
}

/// `x` with contiguous storage (a copy when `x` is a view). Burn has no explicit "contiguous"
/// op; a reshape of a non-contiguous tensor to another shape makes one on every backend (Flex,
/// CubeCL), and a contiguous tensor passes through both reshapes as a view.
pub fn copy_2d<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
    let [rows, cols] = x.dims();
    x.reshape([rows * cols]).reshape([rows, cols])
}

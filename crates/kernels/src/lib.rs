//! segburn's own CPU kernels, where Burn 0.21's Flex falls short in speed or accuracy.
//!
//! One folder per kernel family; each folder owns its trait, its Flex implementation
//! (`flex.rs`), its autodiff operations (`autodiff.rs`), its dispatch functions (`mod.rs`) and
//! its math (on plain slices, in the other files), so that one kernel is read and changed in
//! one folder:
//! - [`conv`]: the convolution (im2col forward, weight and input gradients; a direct forward
//!   for inference on AVX-512) and the transposed convolution whose kernel equals its stride;
//! - [`resize`]: the bilinear resize, both corner conventions;
//! - [`norm`]: the training batch norm and the layer norm along one axis;
//! - [`attention`]: multi-head attention on token rows;
//! - [`linear`]: `x Wᵀ + b` with PyTorch's weight layout;
//! - [`elementwise`]: the exact GELU and PagFM's pixel gate;
//! - [`layout`]: permuted copies and the block-to-space copy;
//! - [`loss`]: the cross-entropy's class log-probabilities and SAM2's mask-loss sums.
//!
//! **The dispatch rule** (`dispatch.rs`): every public op here takes tensors of any
//! `B: Backend`. On the CPU in f32 or f64 it runs our kernels: in training (`Autodiff<Flex>`)
//! inside autodiff operations of our own with our gradients, in inference (plain `Flex`) the
//! forward kernels directly. On every other backend (CUDA, wgpu) and in half precision it calls
//! Burn's ops, so nothing changes there; except where Burn's op has no backward on that backend:
//! in training off Flex the bilinear resize is a composition of Burn ops (`resize/composed.rs`).
//!
//! Shared by the families: `autodiff.rs` (the autodiff ceremony, written once),
//! `flex_buffers.rs` (Flex tensors as slices and back), `product.rs` (one `gemm` matrix
//! product: AVX-512 where the CPU has it, AVX2 elsewhere), `float.rs` (f32/f64 with f64 sums),
//! `vector_math.rs` (a branch-free `exp` and the CPU's vector instructions).
//!
//! Every result is independent of the number of threads: work is split into pieces of fixed
//! size, and every sum runs in a fixed order. `cargo xtask bench-kernels` times each kernel
//! against Burn's op.

pub mod accuracy;
pub mod attention;
mod autodiff;
pub mod conv;
mod dispatch;
pub mod elementwise;
mod flex_buffers;
pub mod float;
pub mod layout;
pub mod linear;
pub mod loss;
pub mod norm;
pub mod product;
pub mod resize;
mod vector_math;

pub use attention::{fused_multi_head_attention, multi_head_attention, AttentionKernels};
pub use conv::{conv2d, conv2d_then, conv_transpose2d, AfterConv, ConvKernels};
pub use elementwise::{
    channel_dot, channel_dot_by_burn, gate_blend, gate_blend_by_burn, gelu, ElementwiseKernels,
};
pub use layout::{copy_2d, permute, LayoutKernels};
pub use linear::{linear, LinearKernels};
pub use loss::{class_log_probs, mask_loss_sums, Focal, LossKernels, MASK_LOSS_SUMS};
pub use norm::{batch_norm_train, layer_norm, NormKernels};
pub use resize::{interpolate_bilinear, interpolate_bilinear_composed, ResizeKernels};
pub use vector_math::{vector_instructions, VectorInstructions};

/// Every kernel family of a backend: what `Flex` implements.
pub trait CpuKernels:
    ConvKernels
    + ResizeKernels
    + NormKernels
    + AttentionKernels
    + LinearKernels
    + ElementwiseKernels
    + LayoutKernels
    + LossKernels
{
}

impl<B> CpuKernels for B where
    B: ConvKernels
        + ResizeKernels
        + NormKernels
        + AttentionKernels
        + LinearKernels
        + ElementwiseKernels
        + LayoutKernels
        + LossKernels
{
}

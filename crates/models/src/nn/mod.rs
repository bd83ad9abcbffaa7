//! Layers shared by the models, with PyTorch semantics where Burn's differ.
//!
//! Precision rule: activations flow in the dtype of the model's input. A convolution casts its
//! f32 master weights to that dtype, so an f16/bf16 input runs the convolutions in half
//! precision; [`BatchNorm2d`] always computes its statistics in at least f32.

mod batch_norm;
mod conv;
mod layout;
mod resize;

pub use batch_norm::{BatchNorm2d, BatchNorm2dConfig};
pub use conv::{
    conv2d_as_configured, conv2d_in_input_dtype, conv_then_batch_norm, conv_then_batch_norm_then,
    conv_transpose2d_in_input_dtype, pidnet_conv, ConvBn, ConvBnConfig, PreActConv,
    PreActConvConfig,
};
pub use layout::{channels_first_image, channels_last_tokens, copy_2d, transposed_copy};
pub use resize::{resize_bilinear, resize_bilinear_align_corners};

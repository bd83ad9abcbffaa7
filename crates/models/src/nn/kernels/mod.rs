//! segburn's own CPU kernels, where Burn 0.21's Flex falls short in speed or accuracy.
//!
//! The kernels sit behind a backend-extension trait, [`CpuKernels`], implemented for `Flex`
//! (`flex.rs`, on plain slices in the other files); `autodiff_ops.rs` wraps them in autodiff
//! operations of their own for `Autodiff<Flex>`. The dispatch functions here ([`conv2d`],
//! [`conv_transpose2d`], [`interpolate_bilinear`], [`class_log_probs`], [`batch_norm_train`],
//! [`mask_loss_sums`], [`layer_norm`], [`permute`], [`gelu`], [`multi_head_attention`],
//! [`linear`]) use them on the CPU in f32 or f64, in training (`Autodiff<Flex>`, with our
//! gradients) and, for the forward kernels, in inference (plain `Flex`); on every other
//! backend (CUDA) and in half precision they call Burn's ops, so nothing changes there.
//!
//! Why the dispatch compares types instead of asking for a `B: CpuKernels` bound: the models,
//! losses and trainers are generic over `B: Backend` in some 300 places, and the choice is
//! between two concrete types. The `TypeId` comparison is resolved at compile time.
//!
//! The kernels (`cargo xtask bench-kernels` times each against Burn's op; numbers in
//! `docs/benchmarks.md`):
//! - `conv.rs`, the convolution as im2col / col2im and matrix products: forward (with the
//!   bias written first), weight gradient and input gradient, each over tiles that stay in
//!   cache. On PIDNet-S's six measured layers, against Flex's: forward 2.6× faster, input
//!   gradient 2.3×, weight gradient 8.1×. The forward's tiles sum every output exactly as one
//!   product over the whole image does (as PyTorch's GEMM path sums), which the training
//!   gradients' accuracy depends on (the boundary head's gradient error is 0.04× PyTorch's
//!   bound with these sums, 4× with gemm's small-product blocking).
//! - `bilinear.rs`, the bilinear resize, forward and input gradient, both corner conventions:
//!   separable, parallel over planes; 4.8× forward and 19× backward on six PIDNet-S shapes.
//!   Its autodiff op keeps the input's shape, not the input.
//! - `class_log_probs.rs`, the loss's log-softmax gathered at the target class, forward and
//!   gradient in two passes over the class planes (Burn's composition broadcasts its class
//!   sum's gradient element by element and scatters the gather's).
//! - `batch_norm.rs`, a training batch norm (batch statistics), forward and gradients in a few
//!   passes with f64 sums, instead of some ten composed ops each way.
//! - `mask_loss.rs`, the per-mask sums of SAM2's loss (focal, dice, IoU counts) in one pass
//!   each way instead of some twenty element-wise ops, with the pixel arithmetic vectorised
//!   (`vector_math.rs`; AVX2 and AVX-512 builds of the same code, same bits): the SAM2 bench
//!   step's loss forward went from 74 to 13 ms, then 5 ms.
//! - `blocks_to_space.rs`, the copy that makes a transposed convolution whose kernel equals its
//!   stride (SAM2's 2×2 upscaling) a matrix product, used in training (Flex's gradients of that
//!   convolution were 9 % of the SAM2 step).
//! - `attention.rs`, multi-head attention on `[B, N, H·d]` token rows, forward and gradients,
//!   one task per image and head (Burn's composition copied the heads' gradients element by
//!   element).
//! - `layer_norm.rs`, a layer norm along one axis (the transformers' `LayerNorm` and SAM2's
//!   `LayerNorm2d`), forward and gradients in a few passes with f64 sums, instead of some eight
//!   composed ops each way and Flex's slow broadcasts of the per-pixel statistics.
//! - `permute.rs`, the copy of a permuted view into a row-major buffer, run by run in
//!   parallel (Flex walks such views element by element on one thread: Hiera's window
//!   partitions and head splits).
//! - `gelu.rs`, the exact GELU in f32 with the `erf` PyTorch's vectorised CPU kernels use,
//!   forward and gradient (Flex's scalar `erff` made GELU ~8 % of the SAM2 step).
//! - `linear.rs`, `x Wᵀ + b` with PyTorch's `[out, in]` weight and its gradients, one product
//!   each (Flex's matmul zeroes and then copies every output, 3.6 % of the SAM2 step).
//!
//! All products go through `product.rs` (the `gemm` crate, as Flex's matmul): its AVX-512
//! kernels where the CPU has them (the workspace turns on gemm's `x86-v4`), AVX2 elsewhere.
//!
//! Every result is independent of the number of threads: work is split into pieces of fixed
//! size, and every sum runs in a fixed order.

pub mod attention;
mod autodiff_ops;
pub mod batch_norm;
pub mod bilinear;
pub mod blocks_to_space;
pub mod class_log_probs;
pub mod conv;
pub mod direct_conv;
mod flex;
pub mod gelu;
pub mod layer_norm;
pub mod linear;
pub mod mask_loss;
pub mod permute;
pub mod pixel_gate;
pub mod product;
mod vector_math;

use std::any::{Any, TypeId};

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::Backend;
use burn::tensor::ops::{
    ConvOptions, ConvTransposeOptions, FloatTensor, InterpolateMode, InterpolateOptions,
};
use burn::tensor::{DType, Int, Tensor, TensorPrimitive};

use batch_norm::BatchStatistics;
use layer_norm::LayerStatistics;
pub use mask_loss::{Focal, MASK_LOSS_SUMS};
pub use vector_math::{vector_instructions, VectorInstructions};

use autodiff_ops::{
    attention_with_own_kernels, batch_norm_train_with_own_kernels,
    blocks_to_space_with_own_kernels, channel_dot_with_own_kernels,
    class_log_probs_with_own_kernels, conv2d_with_own_kernels, gate_blend_with_own_kernels,
    gelu_with_own_kernels, interpolate_bilinear_with_own_kernels, layer_norm_with_own_kernels,
    linear_with_own_kernels, mask_loss_sums_with_own_kernels, permute_with_own_kernels,
};

/// Kernels a backend computes with code of its own.
pub trait CpuKernels: Backend {
    /// `conv2d(x, weight) + bias`.
    fn conv2d_forward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `dL/dx` of `conv2d(x, weight)` given `dL/doutput`; same contract as Burn's
    /// `conv2d_x_backward`.
    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `dL/dweight` of `conv2d(x, weight)` given `dL/doutput`; same contract as Burn's
    /// `conv2d_weight_backward`.
    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// `interpolate(x, output_size)` in bilinear mode with `align_corners`.
    fn bilinear_forward(
        x: FloatTensor<Self>,
        output_size: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self>;

    /// `dL/dx` of [`CpuKernels::bilinear_forward`] for an input of shape `input_shape`, given
    /// `dL/doutput` (whose shape gives the output size).
    fn bilinear_input_grad(
        input_shape: [usize; 4],
        output_grad: FloatTensor<Self>,
        align_corners: bool,
    ) -> FloatTensor<Self>;

    /// `(out, lse)`: `log_softmax(x, dim=1)` of `[N, C, H, W]` logits gathered at each pixel's
    /// class (`classes`, `N·H·W` values, each below `C`), `[N, H, W]`, and the log-sum-exp it
    /// subtracted, `[N, H, W]`.
    fn class_log_probs(
        x: FloatTensor<Self>,
        classes: &[usize],
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// A training batch norm of `[N, C, H, W]` (batch statistics, biased variance): the output
    /// and the per-channel mean and variance.
    fn batch_norm_train(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        eps: f64,
    ) -> (FloatTensor<Self>, BatchStatistics);

    /// `(dx, dweight, dbias)` of [`CpuKernels::batch_norm_train`] given `dL/doutput`.
    fn batch_norm_train_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        statistics: &BatchStatistics,
        eps: f64,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];

    /// A layer norm of `x` along `axis` ([`mod@layer_norm`]): the output and the per-position
    /// mean and `1/√(var + eps)`.
    fn layer_norm_along(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        axis: usize,
        eps: f64,
    ) -> (FloatTensor<Self>, LayerStatistics);

    /// `(dx, dweight, dbias)` of [`CpuKernels::layer_norm_along`] given `dL/doutput`.
    fn layer_norm_along_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        statistics: &LayerStatistics,
        axis: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];

    /// `x.permute(axes)` copied into a row-major buffer ([`mod@permute`]).
    fn permuted_copy(x: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;

    /// The exact (erf) GELU, element-wise ([`mod@gelu`]).
    fn exact_gelu(x: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `dL/dx` of [`CpuKernels::exact_gelu`] given `dL/doutput`.
    fn exact_gelu_grad(x: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `[N, C·k·k, H, W] -> [N, C, k·H, k·W]` ([`blocks_to_space`]).
    fn blocks_to_space(x: FloatTensor<Self>, block: usize) -> FloatTensor<Self>;

    /// The inverse of [`CpuKernels::blocks_to_space`], and its gradient.
    fn space_to_blocks(x: FloatTensor<Self>, block: usize) -> FloatTensor<Self>;

    /// `[N, M, 6]`: the per-mask sums of SAM2's mask losses ([`mask_loss`]) of `[N, M, L]`
    /// logits against `[N, L]` targets.
    fn mask_loss_sums(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        focal: Focal,
    ) -> FloatTensor<Self>;

    /// `dL/dlogits` of [`CpuKernels::mask_loss_sums`] given `dL/dsums`.
    fn mask_loss_sums_grad(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        focal: Focal,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// `(out, probs)`: multi-head attention ([`mod@attention`]) of `[B, Nq, H·d]` queries
    /// against `[B, Nk, H·d]` keys and `[B, Nk, H·dv]` values, `[B, Nq, H·dv]`, and the
    /// `[B, H, Nq, Nk]` softmax probabilities its gradient reads.
    fn multi_head_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        heads: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// `[dq, dk, dv]` of [`CpuKernels::multi_head_attention`] given `dL/dout` and the probabilities it
    /// returned.
    fn multi_head_attention_grad(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        probs: FloatTensor<Self>,
        heads: usize,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];

    /// `x Wᵀ + b` for `x` `[rows, in]`, `W` `[out, in]` (PyTorch's layout) and `b` `[out]`.
    fn linear_layer(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self>;

    /// `(dx, dW, db)` of [`CpuKernels::linear_layer`] given `dL/dy`; `db` only `with_bias`.
    fn linear_layer_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        with_bias: bool,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        Option<FloatTensor<Self>>,
    );

    /// `Σ_c a·b` over the channels of two `[N, C, H, W]` maps, `[N, 1, H, W]` ([`pixel_gate`]).
    fn channel_dot(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `x·s` for `x` `[N, C, H, W]` and `s` `[N, 1, H, W]` (the gradient of
    /// [`CpuKernels::channel_dot`]).
    fn scale_by_pixel(x: FloatTensor<Self>, s: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `x·(1 − s) + y·s` for `[N, C, H, W]` maps and `s` `[N, 1, H, W]` ([`pixel_gate`]).
    fn gate_blend(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// `[dx, dy, ds]` of [`CpuKernels::gate_blend`] given `dL/dout`.
    fn gate_blend_grad(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        s: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];

    /// `dL/dx` of [`CpuKernels::class_log_probs`] given `dL/dout` and the `lse` it returned.
    fn class_log_probs_grad(
        x: FloatTensor<Self>,
        classes: &[usize],
        lse: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
}

/// The backend CPU training runs on.
type CpuTraining = Autodiff<Flex>;

/// Who computes an operation on tensors of `B` in some dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Burn's op: CUDA, half precision, any other backend.
    Burn,
    /// Our kernels inside autodiff operations of our own: CPU training in f32/f64.
    OwnTraining,
    /// Our forward kernels directly: CPU inference (plain `Flex`) in f32/f64.
    OwnInference,
}

fn route<B: Backend>(dtype: DType) -> Route {
    if !matches!(dtype, DType::F32 | DType::F64) {
        Route::Burn
    } else if TypeId::of::<B>() == TypeId::of::<CpuTraining>() {
        Route::OwnTraining
    } else if TypeId::of::<B>() == TypeId::of::<Flex>() {
        Route::OwnInference
    } else {
        Route::Burn
    }
}

/// `conv2d(x, weight) + bias`, by our kernels on the CPU in f32/f64 (in training with our
/// gradients), by Burn's op everywhere else.
pub fn conv2d<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    conv2d_then(x, weight, bias, options, AfterConv::nothing())
}

/// What follows a convolution in a residual block: a residual added (same shape as the
/// output), then ReLU. In CPU inference the convolution's output write does both (no extra
/// passes over the output, the same values); elsewhere they run as Burn's ops.
#[derive(Debug, Clone)]
pub struct AfterConv<B: Backend> {
    /// Added to the convolution's output.
    pub residual: Option<Tensor<B, 4>>,
    /// Whether ReLU follows (after the residual).
    pub relu: bool,
}

impl<B: Backend> AfterConv<B> {
    /// The convolution's output as it is.
    pub fn nothing() -> Self {
        Self {
            residual: None,
            relu: false,
        }
    }

    /// ReLU of the output.
    pub fn relu() -> Self {
        Self {
            residual: None,
            relu: true,
        }
    }

    /// The same by Burn's ops, on an output computed elsewhere.
    pub fn apply(self, out: Tensor<B, 4>) -> Tensor<B, 4> {
        let out = match self.residual {
            Some(residual) => out + residual,
            None => out,
        };
        if self.relu {
            burn::tensor::activation::relu(out)
        } else {
            out
        }
    }
}

/// `after(conv2d(x, weight) + bias)`: [`conv2d`] followed by [`AfterConv`].
pub fn conv2d_then<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
    after: AfterConv<B>,
) -> Tensor<B, 4> {
    match route::<B>(x.dtype()) {
        Route::Burn => after.apply(burn::tensor::module::conv2d(x, weight, bias, options)),
        Route::OwnInference => {
            // The bias is written into the output before the product adds to it: no extra pass.
            let bias = bias.map(|bias| primitive(same_backend::<B, Flex, 1>(bias)));
            let residual = after
                .residual
                .map(|residual| primitive(same_backend::<B, Flex, 4>(residual)));
            let out = flex::conv2d_inference(
                primitive(same_backend::<B, Flex, 4>(x)),
                primitive(same_backend::<B, Flex, 4>(weight)),
                bias,
                options,
                residual,
                after.relu,
            );
            from_flex(out)
        }
        Route::OwnTraining => {
            let out: Tensor<B, 4> = same_backend(conv2d_with_own_kernels::<Flex>(
                same_backend(x),
                same_backend(weight),
                options,
            ));
            let out = match bias {
                Some(bias) => add_channel_bias(out, bias),
                None => out,
            };
            after.apply(out)
        }
    }
}

/// PyTorch's `conv_transpose2d(x, weight, bias)` (`weight` `[C_in, C_out, kh, kw]`). Where the
/// kernel equals the stride (no padding, dilation or groups; SAM2's 2×2 upscaling), in CPU
/// training in f32/f64, as one matrix product per image, `Wᵀ X`, and a [`blocks_to_space`]
/// copy (with our gradient for the copy, Burn's for the product); everywhere else by Burn's op.
pub fn conv_transpose2d<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvTransposeOptions<2>,
) -> Tensor<B, 4> {
    let [batch, in_channels, h, w] = x.dims();
    let [_, out_channels, kh, kw] = weight.dims();
    let k = kh;
    let blocks_only = kh == kw
        && options.stride == [k, k]
        && options.padding == [0, 0]
        && options.padding_out == [0, 0]
        && options.dilation == [1, 1]
        && options.groups == 1;
    // Training only: in inference Flex's own transposed convolution is as fast (the SAM2
    // decoder forward measured 1–2 ms faster with it); its gradients are what is slow.
    if !blocks_only || route::<B>(x.dtype()) != Route::OwnTraining {
        return burn::tensor::module::conv_transpose2d(x, weight, bias, options);
    }
    // [1, C_out·k·k, C_in] × [N, C_in, H·W]: the weight as a transposed view, which Flex's
    // matmul reads in place.
    let weight = weight
        .reshape([in_channels, out_channels * k * k])
        .transpose()
        .unsqueeze::<3>();
    let products = weight
        .matmul(x.reshape([batch, in_channels, h * w]))
        .reshape([batch, out_channels * k * k, h, w]);
    let out: Tensor<B, 4> = same_backend(blocks_to_space_with_own_kernels::<Flex>(
        same_backend(products),
        k,
    ));
    match bias {
        Some(bias) => add_channel_bias(out, bias),
        None => out,
    }
}

/// PyTorch's exact GELU, `x Φ(x)`, element-wise: by our kernel (with PyTorch's CPU `erf`
/// approximation, [`gelu`]) on the CPU in f32, in training with our gradient; by Burn's op
/// everywhere else (CUDA, f64, half precision).
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    // The kernel takes f32 only (f64 keeps Burn's exact `erf`).
    let route = match x.dtype() {
        DType::F32 => route::<B>(DType::F32),
        _ => Route::Burn,
    };
    match route {
        Route::Burn => burn::tensor::activation::gelu(x),
        Route::OwnInference => {
            let out = Flex::exact_gelu(primitive(same_backend::<B, Flex, D>(x)));
            from_flex(out)
        }
        Route::OwnTraining => same_backend(gelu_with_own_kernels::<Flex, D>(same_backend(x))),
    }
}

/// `x + bias` per channel of `[N, C, H, W]`, by Burn's ops (which give the gradient): as
/// `[N·C, H·W]` rows plus an `[N·C, 1]` column, the broadcast Flex runs fast both ways (a
/// `[1, C, 1, 1]` operand goes element by element through strided indices for `N > 1`).
fn add_channel_bias<B: Backend>(x: Tensor<B, 4>, bias: Tensor<B, 1>) -> Tensor<B, 4> {
    let dims = x.dims();
    let [n, c, h, w] = dims;
    let column = bias.reshape([1, c]).expand([n, c]).reshape([n * c, 1]);
    (x.reshape([n * c, h * w]) + column).reshape(dims)
}

/// The float primitive of a Flex tensor.
fn primitive<const D: usize>(tensor: Tensor<Flex, D>) -> FloatTensor<Flex> {
    tensor.into_primitive().tensor()
}

/// A Flex result as a tensor of `B` (the caller's route established `B` is `Flex`); the inverse
/// of [`primitive`] and [`same_backend`] together.
fn from_flex<B: Backend, const D: usize>(tensor: FloatTensor<Flex>) -> Tensor<B, D> {
    same_backend(Tensor::<Flex, D>::from_primitive(TensorPrimitive::Float(
        tensor,
    )))
}

/// Re-types a tensor between two names of the same backend (`From` and `To` are one type; the
/// caller compared their `TypeId`s).
fn same_backend<From: Backend, To: Backend, const D: usize>(
    tensor: Tensor<From, D>,
) -> Tensor<To, D> {
    match (Box::new(tensor) as Box<dyn Any>).downcast::<Tensor<To, D>>() {
        Ok(tensor) => *tensor,
        Err(_) => unreachable!("same_backend is called only when the backend types are equal"),
    }
}

/// `Σ_c a·b` over the channels of two `[N, C, H, W]` maps, `[N, 1, H, W]` (PagFM's gate
/// logit): by our kernels on the CPU in f32/f64 (in training with our gradient), by Burn's ops
/// everywhere else.
pub fn channel_dot<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>) -> Tensor<B, 4> {
    if a.dims() != b.dims() {
        return channel_dot_by_burn(a, b);
    }
    match route::<B>(a.dtype()) {
        Route::Burn => channel_dot_by_burn(a, b),
        Route::OwnInference => {
            let [a, b] = [a, b].map(|t| primitive(same_backend::<B, Flex, 4>(t)));
            from_flex(Flex::channel_dot(a, b))
        }
        Route::OwnTraining => same_backend(channel_dot_with_own_kernels::<Flex>(
            same_backend(a),
            same_backend(b),
        )),
    }
}

/// [`channel_dot`] by Burn's ops: the product, then the channel sum as `[N, 1, C] · [N, C, H·W]`
/// with a row of ones (Flex sums over a middle dimension element by element with strided
/// reads, while the product runs in its matrix kernel).
pub fn channel_dot_by_burn<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>) -> Tensor<B, 4> {
    let x = a * b;
    let [n, c, h, w] = x.dims();
    let ones = Tensor::<B, 3>::ones([n, 1, c], &x.device()).cast(x.dtype());
    ones.matmul(x.reshape([n, c, h * w])).reshape([n, 1, h, w])
}

/// `x·(1 − s) + y·s` for `[N, C, H, W]` maps and a per-pixel weight `s` `[N, 1, H, W]`
/// (PagFM's blend): by our kernels on the CPU in f32/f64 (in inference with the bits of Burn's
/// ops; in training with our gradients), by Burn's ops everywhere else.
pub fn gate_blend<B: Backend>(x: Tensor<B, 4>, y: Tensor<B, 4>, s: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, _, h, w] = x.dims();
    if x.dims() != y.dims() || s.dims() != [n, 1, h, w] {
        return gate_blend_by_burn(x, y, s);
    }
    match route::<B>(x.dtype()) {
        Route::Burn => gate_blend_by_burn(x, y, s),
        Route::OwnInference => {
            let [x, y, s] = [x, y, s].map(|t| primitive(same_backend::<B, Flex, 4>(t)));
            from_flex(Flex::gate_blend(x, y, s))
        }
        Route::OwnTraining => same_backend(gate_blend_with_own_kernels::<Flex>(
            same_backend(x),
            same_backend(y),
            same_backend(s),
        )),
    }
}

/// [`gate_blend`] by Burn's ops.
pub fn gate_blend_by_burn<B: Backend>(
    x: Tensor<B, 4>,
    y: Tensor<B, 4>,
    s: Tensor<B, 4>,
) -> Tensor<B, 4> {
    x * (s.clone().neg() + 1.0) + y * s
}

/// PyTorch's `F.interpolate(x, size, mode='bilinear', align_corners)`, by our kernels on the
/// CPU in f32/f64 (in training with our input gradient), by Burn's op everywhere else.
pub fn interpolate_bilinear<B: Backend>(
    x: Tensor<B, 4>,
    size: [usize; 2],
    align_corners: bool,
) -> Tensor<B, 4> {
    match route::<B>(x.dtype()) {
        Route::Burn => {
            let options = InterpolateOptions::new(InterpolateMode::Bilinear)
                .with_align_corners(align_corners);
            burn::tensor::module::interpolate(x, size, options)
        }
        Route::OwnInference => {
            let x = primitive(same_backend::<B, Flex, 4>(x));
            let out = Flex::bilinear_forward(x, size, align_corners);
            from_flex(out)
        }
        Route::OwnTraining => same_backend(interpolate_bilinear_with_own_kernels::<Flex>(
            same_backend(x),
            size,
            align_corners,
        )),
    }
}

/// `log_softmax(x, dim=1)` of `[N, C, H, W]` logits gathered at `index` (`[N, 1, H, W]`, each
/// below `C`) -> `[N, H, W]`, for logits already shifted by a per-pixel constant that keeps
/// `exp` from overflowing (the softmax does not change under the shift). By our kernels (with
/// our gradient) on the CPU in f32/f64, by Burn's ops everywhere else, and also where an index
/// is out of range (Burn's gather then reports it).
///
/// Burn's recipe gathers before the subtraction, so that no second `[N, C, H, W]` tensor is
/// materialised (the upsampled PIDNet logits are ~1 GB per head).
pub fn class_log_probs<B: Backend>(x: Tensor<B, 4>, index: Tensor<B, 4, Int>) -> Tensor<B, 3> {
    let [n, c, h, w] = x.dims();
    let route = route::<B>(x.dtype());
    let classes = match route {
        Route::Burn => None,
        _ => index_values(&index, c).filter(|classes| classes.len() == n * h * w),
    };
    match (route, classes) {
        (Route::OwnTraining, Some(classes)) => same_backend(
            class_log_probs_with_own_kernels::<Flex>(same_backend(x), classes),
        ),
        (Route::OwnInference, Some(classes)) => {
            let (out, _) =
                Flex::class_log_probs(primitive(same_backend::<B, Flex, 4>(x)), &classes);
            from_flex(out)
        }
        _ => {
            let log_sum_exp = x.clone().exp().sum_dim(1).log();
            (x.gather(1, index) - log_sum_exp).reshape([n, h, w])
        }
    }
}

/// A training batch norm of `[N, C, H, W]` by our kernels, when training on the CPU in f32/f64:
/// the output (with our gradients for the input, weight and bias) and the detached batch mean
/// and biased variance, `[C]` each. `None` on every other backend and dtype (the caller then
/// composes Burn's ops).
pub fn batch_norm_train<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 1>,
    bias: Tensor<B, 1>,
    eps: f64,
) -> Option<(Tensor<B, 4>, Tensor<B, 1>, Tensor<B, 1>)> {
    let dtype = x.dtype();
    if route::<B>(dtype) != Route::OwnTraining {
        return None;
    }
    let device = x.device();
    let (out, statistics) = batch_norm_train_with_own_kernels::<Flex>(
        same_backend(x),
        same_backend(weight.cast(dtype)),
        same_backend(bias.cast(dtype)),
        eps,
    );
    let channel = |values: Vec<f64>| {
        let len = values.len();
        Tensor::<B, 1>::from_data(burn::tensor::TensorData::new(values, [len]), &device).cast(dtype)
    };
    Some((
        same_backend(out),
        channel(statistics.mean),
        channel(statistics.var),
    ))
}

/// `x.permute(axes)`, made row-major: on the CPU in f32/f64 by our copy ([`mod@permute`]; in
/// training its gradient is the inverse permutation, copied the same way), so that the
/// reshapes that follow are free; elsewhere Burn's permuted view (copied by whatever reads it).
pub fn permute<B: Backend, const D: usize>(x: Tensor<B, D>, axes: [usize; D]) -> Tensor<B, D> {
    match route::<B>(x.dtype()) {
        Route::Burn => x.permute(axes),
        Route::OwnInference => {
            let out = Flex::permuted_copy(primitive(same_backend::<B, Flex, D>(x)), &axes);
            from_flex(out)
        }
        Route::OwnTraining => {
            same_backend(permute_with_own_kernels::<Flex, D>(same_backend(x), axes))
        }
    }
}

/// A layer norm of `x` along `axis` (the biased variance over that axis at each position, then
/// `weight` and `bias` per channel of it) by our kernels on the CPU in f32/f64, in training
/// with our gradients for the input, weight and bias. `None` on every other backend and dtype,
/// and where `weight` or `bias` does not have the axis' size (the caller then composes Burn's
/// ops).
pub fn layer_norm<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 1>,
    bias: Tensor<B, 1>,
    axis: usize,
    eps: f64,
) -> Option<Tensor<B, D>> {
    let dtype = x.dtype();
    let channels = *x.dims().get(axis)?;
    if weight.dims() != [channels] || bias.dims() != [channels] {
        return None;
    }
    let route = route::<B>(dtype);
    if route == Route::Burn {
        return None;
    }
    let (weight, bias) = (weight.cast(dtype), bias.cast(dtype));
    match route {
        Route::Burn => None,
        Route::OwnInference => {
            let [x, weight, bias] = [
                primitive(same_backend::<B, Flex, D>(x)),
                primitive(same_backend::<B, Flex, 1>(weight)),
                primitive(same_backend::<B, Flex, 1>(bias)),
            ];
            Some(from_flex(
                Flex::layer_norm_along(x, weight, bias, axis, eps).0,
            ))
        }
        Route::OwnTraining => Some(same_backend(layer_norm_with_own_kernels::<Flex, D>(
            same_backend(x),
            same_backend(weight),
            same_backend(bias),
            axis,
            eps,
        ))),
    }
}

/// The per-mask sums of SAM2's mask losses ([`mask_loss`]): `[N, M, L]` mask logits against
/// `[N, L]` targets (each object's target shared by its `M` masks) -> `[N, M, 6]` = (Σ focal,
/// Σ σ(x)·t, Σ σ(x), Σ t, |x > 0 ∧ t > 0|, |x > 0 ∨ t > 0|). The gradient reaches the logits
/// through the first three sums (the counts are piecewise constant); the targets get none. By
/// our kernels on the CPU in f32/f64, by Burn's ops everywhere else.
///
/// # Panics
/// If `targets` is not `[N, L]` for `[N, M, L]` logits (the loss checks its shapes first).
pub fn mask_loss_sums<B: Backend>(
    logits: Tensor<B, 3>,
    targets: Tensor<B, 2>,
    focal: Focal,
) -> Tensor<B, 3> {
    let [n, _, l] = logits.dims();
    assert_eq!(targets.dims(), [n, l], "mask targets must be [N, L]");
    let dtype = logits.dtype();
    let targets = targets.cast(dtype);
    match route::<B>(dtype) {
        Route::Burn => mask_loss::mask_loss_sums_by_burn(logits, targets, focal),
        Route::OwnInference => {
            let out = Flex::mask_loss_sums(
                primitive(same_backend::<B, Flex, 3>(logits)),
                primitive(same_backend::<B, Flex, 2>(targets)),
                focal,
            );
            from_flex(out)
        }
        Route::OwnTraining => {
            let targets: Tensor<CpuTraining, 2> = same_backend(targets);
            same_backend(mask_loss_sums_with_own_kernels::<Flex>(
                same_backend(logits),
                targets.inner(),
                focal,
            ))
        }
    }
}

/// Multi-head scaled dot-product attention, `softmax(q kᵀ / √d) v` per head, on token rows:
/// q `[B, Nq, H·d]`, k `[B, Nk, H·d]`, v `[B, Nk, H·dv]` -> `[B, Nq, H·dv]` (what SAM's
/// attention computes between its projections). By our kernels ([`mod@attention`]) on the CPU in
/// f32/f64, in training with our gradients; by Burn's ops everywhere else.
///
/// # Panics
/// If the shapes disagree or `heads` does not divide the widths (a programming error: the
/// layer's configuration fixes them).
pub fn multi_head_attention<B: Backend>(
    q: Tensor<B, 3>,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    heads: usize,
) -> Tensor<B, 3> {
    let ([batch, queries, width], [k_batch, keys, k_width], [v_batch, v_keys, v_width]) =
        (q.dims(), k.dims(), v.dims());
    assert!(
        heads > 0
            && width == k_width
            && (batch, keys) == (k_batch, v_keys)
            && batch == v_batch
            && width.is_multiple_of(heads)
            && v_width.is_multiple_of(heads),
        "attention shapes q {:?}, k {:?}, v {:?} with {heads} heads",
        q.dims(),
        k.dims(),
        v.dims()
    );
    let empty = [batch, queries, keys, width, v_width].contains(&0);
    let same_dtype = q.dtype() == k.dtype() && q.dtype() == v.dtype();
    match route::<B>(q.dtype()) {
        Route::Burn => attention::attention_by_burn(q, k, v, heads),
        _ if empty || !same_dtype => attention::attention_by_burn(q, k, v, heads),
        Route::OwnInference => {
            let [q, k, v] = [q, k, v].map(|x| primitive(same_backend::<B, Flex, 3>(x)));
            let (out, _) = Flex::multi_head_attention(q, k, v, heads);
            from_flex(out)
        }
        Route::OwnTraining => same_backend(attention_with_own_kernels::<Flex>(
            same_backend(q),
            same_backend(k),
            same_backend(v),
            heads,
        )),
    }
}

/// `x Wᵀ + b` (`x` `[rows, in]`, `W` `[out, in]` as in PyTorch, `b` `[out]`), by our kernel on
/// the CPU in f32/f64 (in training with our gradients), by Burn's ops everywhere else.
pub fn linear<B: Backend>(
    x: Tensor<B, 2>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, 2> {
    let ([rows, inputs], [outputs, weight_inputs]) = (x.dims(), weight.dims());
    let fits = inputs == weight_inputs
        && bias.as_ref().is_none_or(|b| b.dims() == [outputs])
        && ![rows, inputs, outputs].contains(&0);
    let same_dtype =
        weight.dtype() == x.dtype() && bias.as_ref().is_none_or(|b| b.dtype() == x.dtype());
    match route::<B>(x.dtype()) {
        Route::Burn => linear::linear_by_burn(x, weight, bias),
        _ if !fits || !same_dtype => linear::linear_by_burn(x, weight, bias),
        Route::OwnInference => {
            let out = Flex::linear_layer(
                primitive(same_backend::<B, Flex, 2>(x)),
                primitive(same_backend::<B, Flex, 2>(weight)),
                bias.map(|b| primitive(same_backend::<B, Flex, 1>(b))),
            );
            from_flex(out)
        }
        Route::OwnTraining => same_backend(linear_with_own_kernels::<Flex>(
            same_backend(x),
            same_backend(weight),
            bias.map(same_backend),
        )),
    }
}

/// The values of a class index tensor, if all lie in `0..classes`.
fn index_values<B: Backend>(index: &Tensor<B, 4, Int>, classes: usize) -> Option<Vec<usize>> {
    let data = index.to_data().convert::<i64>();
    let values = data.as_slice::<i64>().ok()?;
    values
        .iter()
        .map(|&v| usize::try_from(v).ok().filter(|&v| v < classes))
        .collect()
}

/// A fixed pseudo-random sequence in [-1, 1), for the kernels' unit tests.
#[cfg(test)]
fn test_values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// The dispatch tests' bound on one result: ours in f64 within 1e-13 of the exact one (Burn's
/// ops in f64), ours in f32 within 3× the f32 error of Burn's ops (both against the exact).
#[cfg(test)]
fn assert_as_accurate_as_burn(what: &str, [exact, ours64, ours32, burn32]: [&[f64]; 4]) {
    use crate::fixtures::rel_l2;
    let e64 = rel_l2(ours64, exact);
    assert!(e64 <= 1e-13, "{what} f64: {e64:e}");
    let (ours, burn) = (rel_l2(ours32, exact), rel_l2(burn32, exact));
    assert!(
        ours <= 3.0 * burn.max(1e-7),
        "{what} f32: ours {ours:e}, Burn's {burn:e}"
    );
}

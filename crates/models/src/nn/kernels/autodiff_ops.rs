//! The autodiff operations of the kernels of [`CpuKernels`]: a convolution (forward, input
//! gradient and weight gradient), a bilinear resize, the loss's class log-probabilities, a
//! training batch norm, a layer norm, a permuted copy, GELU, the block-to-space copy, SAM2's
//! mask-loss sums, multi-head attention, a linear, and PagFM's channel dot product and blend
//! (each with its gradient).

use burn::backend::Autodiff;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::NoCheckpointing;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_autodiff::NodeId;

use super::batch_norm::BatchStatistics;
use super::layer_norm::LayerStatistics;
use super::permute::inverse_axes;
use super::{CpuKernels, Focal};

/// Registers each parent's gradient, skipping the parents that need none (`None`).
fn register_each<B: CpuKernels, const N: usize>(
    parents: [Option<NodeId>; N],
    gradients: [B::FloatTensorPrimitive; N],
    grads: &mut Gradients,
) {
    for (id, grad) in parents.into_iter().zip(gradients) {
        if let Some(id) = id {
            grads.register::<B>(id, grad);
        }
    }
}

/// The backward step: what the forward pass kept is the input, the weight and the options.
#[derive(Debug)]
struct ConvBackward;

impl<B: CpuKernels> Backward<B, 2> for ConvBackward {
    type State = (NodeId, NodeId, ConvOptions<2>);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, weight_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (x_id, weight_id, options) = ops.state;
        let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_id);
        let weight = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(weight_id);
        if let Some(node) = weight_node {
            let grad = B::conv2d_weight_grad(
                x.clone(),
                weight.clone(),
                output_grad.clone(),
                options.clone(),
            );
            grads.register::<B>(node.id, grad);
        }
        if let Some(node) = x_node {
            grads.register::<B>(
                node.id,
                B::conv2d_input_grad(x, weight, output_grad, options),
            );
        }
    }
}

/// `conv2d(x, weight)` (no bias) on `Autodiff<B>`, by `B`'s own kernels.
pub fn conv2d_with_own_kernels<B: CpuKernels>(
    x: Tensor<Autodiff<B>, 4>,
    weight: Tensor<Autodiff<B>, 4>,
    options: ConvOptions<2>,
) -> Tensor<Autodiff<B>, 4> {
    let x = x.into_primitive().tensor();
    let weight = weight.into_primitive().tensor();
    let output = match ConvBackward
        .prepare::<NoCheckpointing>([x.node.clone(), weight.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let state = (
                prep.checkpoint(&x),
                prep.checkpoint(&weight),
                options.clone(),
            );
            prep.finish(
                state,
                B::conv2d_forward(x.primitive, weight.primitive, None, options),
            )
        }
        OpsKind::UnTracked(prep) => prep.finish(B::conv2d_forward(
            x.primitive,
            weight.primitive,
            None,
            options,
        )),
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of a bilinear resize: it needs only the input's shape, not its values
/// (Burn's op keeps the whole input for its backward pass).
#[derive(Debug)]
struct BilinearBackward;

impl<B: CpuKernels> Backward<B, 1> for BilinearBackward {
    type State = ([usize; 4], bool);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let [x_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (input_shape, align_corners) = ops.state;
        if let Some(node) = x_node {
            let grad = B::bilinear_input_grad(input_shape, output_grad, align_corners);
            grads.register::<B>(node.id, grad);
        }
    }
}

/// `interpolate(x, size)` in bilinear mode on `Autodiff<B>`, by `B`'s own kernels.
pub fn interpolate_bilinear_with_own_kernels<B: CpuKernels>(
    x: Tensor<Autodiff<B>, 4>,
    size: [usize; 2],
    align_corners: bool,
) -> Tensor<Autodiff<B>, 4> {
    let input_shape = x.dims();
    let x = x.into_primitive().tensor();
    let output = match BilinearBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(
            (input_shape, align_corners),
            B::bilinear_forward(x.primitive, size, align_corners),
        ),
        OpsKind::UnTracked(prep) => {
            prep.finish(B::bilinear_forward(x.primitive, size, align_corners))
        }
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`class_log_probs_with_own_kernels`]: the logits (checkpointed), each
/// pixel's class and the log-sum-exp per pixel.
#[derive(Debug)]
struct ClassLogProbsBackward;

impl<B: CpuKernels> Backward<B, 1> for ClassLogProbsBackward {
    type State = (NodeId, Vec<usize>, B::FloatTensorPrimitive);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (x_id, classes, lse) = ops.state;
        if let Some(node) = x_node {
            let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_id);
            let grad = B::class_log_probs_grad(x, &classes, lse, output_grad);
            grads.register::<B>(node.id, grad);
        }
    }
}

/// `log_softmax(x, dim=1)` gathered at `classes` on `Autodiff<B>`, by `B`'s own kernels.
pub fn class_log_probs_with_own_kernels<B: CpuKernels>(
    x: Tensor<Autodiff<B>, 4>,
    classes: Vec<usize>,
) -> Tensor<Autodiff<B>, 3> {
    let x = x.into_primitive().tensor();
    let output = match ClassLogProbsBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let x_id = prep.checkpoint(&x);
            let (out, lse) = B::class_log_probs(x.primitive, &classes);
            prep.finish((x_id, classes, lse), out)
        }
        OpsKind::UnTracked(prep) => prep.finish(B::class_log_probs(x.primitive, &classes).0),
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`gelu_with_own_kernels`]: the input (checkpointed).
#[derive(Debug)]
struct GeluBackward;

impl<B: CpuKernels> Backward<B, 1> for GeluBackward {
    type State = NodeId;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        if let Some(node) = x_node {
            let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(ops.state);
            grads.register::<B>(node.id, B::exact_gelu_grad(x, output_grad));
        }
    }
}

/// The exact GELU on `Autodiff<B>`, by `B`'s own kernels.
pub fn gelu_with_own_kernels<B: CpuKernels, const D: usize>(
    x: Tensor<Autodiff<B>, D>,
) -> Tensor<Autodiff<B>, D> {
    let x = x.into_primitive().tensor();
    let output = match GeluBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let x_id = prep.checkpoint(&x);
            prep.finish(x_id, B::exact_gelu(x.primitive))
        }
        OpsKind::UnTracked(prep) => prep.finish(B::exact_gelu(x.primitive)),
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`permute_with_own_kernels`]: the axes that undo the permutation.
#[derive(Debug)]
struct PermuteBackward;

impl<B: CpuKernels> Backward<B, 1> for PermuteBackward {
    type State = Vec<usize>;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let [x_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        if let Some(node) = x_node {
            grads.register::<B>(node.id, B::permuted_copy(output_grad, &ops.state));
        }
    }
}

/// `x.permute(axes)` copied row-major on `Autodiff<B>`, by `B`'s own kernels.
pub fn permute_with_own_kernels<B: CpuKernels, const D: usize>(
    x: Tensor<Autodiff<B>, D>,
    axes: [usize; D],
) -> Tensor<Autodiff<B>, D> {
    let x = x.into_primitive().tensor();
    let output = match PermuteBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            prep.finish(inverse_axes(&axes), B::permuted_copy(x.primitive, &axes))
        }
        OpsKind::UnTracked(prep) => prep.finish(B::permuted_copy(x.primitive, &axes)),
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`blocks_to_space_with_own_kernels`]: the block size.
#[derive(Debug)]
struct BlocksToSpaceBackward;

impl<B: CpuKernels> Backward<B, 1> for BlocksToSpaceBackward {
    type State = usize;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let [x_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        if let Some(node) = x_node {
            grads.register::<B>(node.id, B::space_to_blocks(output_grad, ops.state));
        }
    }
}

/// `[N, C·k·k, H, W] -> [N, C, k·H, k·W]` on `Autodiff<B>`, by `B`'s own kernels.
pub fn blocks_to_space_with_own_kernels<B: CpuKernels>(
    x: Tensor<Autodiff<B>, 4>,
    block: usize,
) -> Tensor<Autodiff<B>, 4> {
    let x = x.into_primitive().tensor();
    let output = match BlocksToSpaceBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(block, B::blocks_to_space(x.primitive, block)),
        OpsKind::UnTracked(prep) => prep.finish(B::blocks_to_space(x.primitive, block)),
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`mask_loss_sums_with_own_kernels`]: the logits (checkpointed), the
/// targets and the focal loss's parameters.
#[derive(Debug)]
struct MaskLossSumsBackward;

impl<B: CpuKernels> Backward<B, 1> for MaskLossSumsBackward {
    type State = (NodeId, B::FloatTensorPrimitive, Focal);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [logits_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (logits_id, targets, focal) = ops.state;
        if let Some(node) = logits_node {
            let logits = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(logits_id);
            let grad = B::mask_loss_sums_grad(logits, targets, focal, output_grad);
            grads.register::<B>(node.id, grad);
        }
    }
}

/// SAM2's per-mask loss sums on `Autodiff<B>`, by `B`'s own kernels; the targets are data.
pub fn mask_loss_sums_with_own_kernels<B: CpuKernels>(
    logits: Tensor<Autodiff<B>, 3>,
    targets: Tensor<B, 2>,
    focal: Focal,
) -> Tensor<Autodiff<B>, 3> {
    let logits = logits.into_primitive().tensor();
    let targets = targets.into_primitive().tensor();
    let output = match MaskLossSumsBackward
        .prepare::<NoCheckpointing>([logits.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let logits_id = prep.checkpoint(&logits);
            let sums = B::mask_loss_sums(logits.primitive, targets.clone(), focal);
            prep.finish((logits_id, targets, focal), sums)
        }
        OpsKind::UnTracked(prep) => {
            prep.finish(B::mask_loss_sums(logits.primitive, targets, focal))
        }
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of a training batch norm: the input (checkpointed), the weight, the batch
/// statistics and `eps`.
#[derive(Debug)]
struct BatchNormBackward;

impl<B: CpuKernels> Backward<B, 3> for BatchNormBackward {
    type State = (NodeId, B::FloatTensorPrimitive, BatchStatistics, f64);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let parents = ops.parents.map(|node| node.map(|node| node.id));
        let output_grad = grads.consume::<B>(&ops.node);
        let (x_id, weight, statistics, eps) = ops.state;
        let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_id);
        let gradients = B::batch_norm_train_grad(x, weight, &statistics, eps, output_grad);
        register_each::<B, 3>(parents, gradients, grads);
    }
}

/// A training batch norm on `Autodiff<B>` by `B`'s own kernels: the output and the batch
/// statistics (not tracked).
pub fn batch_norm_train_with_own_kernels<B: CpuKernels>(
    x: Tensor<Autodiff<B>, 4>,
    weight: Tensor<Autodiff<B>, 1>,
    bias: Tensor<Autodiff<B>, 1>,
    eps: f64,
) -> (Tensor<Autodiff<B>, 4>, BatchStatistics) {
    let x = x.into_primitive().tensor();
    let weight = weight.into_primitive().tensor();
    let bias = bias.into_primitive().tensor();
    let nodes = [x.node.clone(), weight.node.clone(), bias.node.clone()];
    let (output, statistics) = match BatchNormBackward
        .prepare::<NoCheckpointing>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let x_id = prep.checkpoint(&x);
            let (out, statistics) =
                B::batch_norm_train(x.primitive, weight.primitive.clone(), bias.primitive, eps);
            let state = (x_id, weight.primitive, statistics.clone(), eps);
            (prep.finish(state, out), statistics)
        }
        OpsKind::UnTracked(prep) => {
            let (out, statistics) =
                B::batch_norm_train(x.primitive, weight.primitive, bias.primitive, eps);
            (prep.finish(out), statistics)
        }
    };
    (
        Tensor::from_primitive(TensorPrimitive::Float(output)),
        statistics,
    )
}

/// The backward step of [`layer_norm_with_own_kernels`]: the input (checkpointed), the weight,
/// the per-position statistics and the axis.
#[derive(Debug)]
struct LayerNormBackward;

impl<B: CpuKernels> Backward<B, 3> for LayerNormBackward {
    type State = (NodeId, B::FloatTensorPrimitive, LayerStatistics, usize);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let parents = ops.parents.map(|node| node.map(|node| node.id));
        let output_grad = grads.consume::<B>(&ops.node);
        let (x_id, weight, statistics, axis) = ops.state;
        let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_id);
        let gradients = B::layer_norm_along_grad(x, weight, &statistics, axis, output_grad);
        register_each::<B, 3>(parents, gradients, grads);
    }
}

/// A layer norm along `axis` on `Autodiff<B>` by `B`'s own kernels.
pub fn layer_norm_with_own_kernels<B: CpuKernels, const D: usize>(
    x: Tensor<Autodiff<B>, D>,
    weight: Tensor<Autodiff<B>, 1>,
    bias: Tensor<Autodiff<B>, 1>,
    axis: usize,
    eps: f64,
) -> Tensor<Autodiff<B>, D> {
    let x = x.into_primitive().tensor();
    let weight = weight.into_primitive().tensor();
    let bias = bias.into_primitive().tensor();
    let nodes = [x.node.clone(), weight.node.clone(), bias.node.clone()];
    let output = match LayerNormBackward
        .prepare::<NoCheckpointing>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let x_id = prep.checkpoint(&x);
            let (out, statistics) = B::layer_norm_along(
                x.primitive,
                weight.primitive.clone(),
                bias.primitive,
                axis,
                eps,
            );
            prep.finish((x_id, weight.primitive, statistics, axis), out)
        }
        OpsKind::UnTracked(prep) => {
            let (out, _) =
                B::layer_norm_along(x.primitive, weight.primitive, bias.primitive, axis, eps);
            prep.finish(out)
        }
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`attention_with_own_kernels`]: q, k, v, the softmax probabilities
/// and the number of heads.
#[derive(Debug)]
struct AttentionBackward;

impl<B: CpuKernels> Backward<B, 3> for AttentionBackward {
    type State = ([B::FloatTensorPrimitive; 4], usize);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let output_grad = grads.consume::<B>(&ops.node);
        let ([q, k, v, probs], heads) = ops.state;
        let gradients = B::multi_head_attention_grad(q, k, v, probs, heads, output_grad);
        register_each::<B, 3>(
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
            grads,
        );
    }
}

/// Multi-head attention on `Autodiff<B>`, by `B`'s own kernels.
pub fn attention_with_own_kernels<B: CpuKernels>(
    q: Tensor<Autodiff<B>, 3>,
    k: Tensor<Autodiff<B>, 3>,
    v: Tensor<Autodiff<B>, 3>,
    heads: usize,
) -> Tensor<Autodiff<B>, 3> {
    let [q, k, v] = [q, k, v].map(|x| x.into_primitive().tensor());
    let output = match AttentionBackward
        .prepare::<NoCheckpointing>([q.node.clone(), k.node.clone(), v.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let [q, k, v] = [q.primitive, k.primitive, v.primitive];
            let (out, probs) = B::multi_head_attention(q.clone(), k.clone(), v.clone(), heads);
            prep.finish(([q, k, v, probs], heads), out)
        }
        OpsKind::UnTracked(prep) => {
            prep.finish(B::multi_head_attention(q.primitive, k.primitive, v.primitive, heads).0)
        }
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of a linear: it keeps the input and the weight. `N` is 2 without a bias
/// (parents `x`, `W`) and 3 with one (`x`, `W`, `b`).
#[derive(Debug)]
struct LinearBackward<const N: usize>;

impl<B: CpuKernels, const N: usize> Backward<B, N> for LinearBackward<N> {
    type State = [B::FloatTensorPrimitive; 2];

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let output_grad = grads.consume::<B>(&ops.node);
        let [x, weight] = ops.state;
        let (x_grad, weight_grad, bias_grad) = B::linear_layer_grad(x, weight, output_grad, N == 3);
        for (node, grad) in
            ops.parents
                .into_iter()
                .zip([Some(x_grad), Some(weight_grad), bias_grad])
        {
            if let (Some(node), Some(grad)) = (node, grad) {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

/// `x Wᵀ + b` on `Autodiff<B>`, by `B`'s own kernels.
pub fn linear_with_own_kernels<B: CpuKernels>(
    x: Tensor<Autodiff<B>, 2>,
    weight: Tensor<Autodiff<B>, 2>,
    bias: Option<Tensor<Autodiff<B>, 1>>,
) -> Tensor<Autodiff<B>, 2> {
    let [x, weight] = [x, weight].map(|t| t.into_primitive().tensor());
    let output = match bias.map(|b| b.into_primitive().tensor()) {
        None => match LinearBackward::<2>
            .prepare::<NoCheckpointing>([x.node.clone(), weight.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let out = B::linear_layer(x.primitive.clone(), weight.primitive.clone(), None);
                prep.finish([x.primitive, weight.primitive], out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::linear_layer(x.primitive, weight.primitive, None))
            }
        },
        Some(bias) => match LinearBackward::<3>
            .prepare::<NoCheckpointing>([x.node.clone(), weight.node.clone(), bias.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let out = B::linear_layer(
                    x.primitive.clone(),
                    weight.primitive.clone(),
                    Some(bias.primitive),
                );
                prep.finish([x.primitive, weight.primitive], out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::linear_layer(
                x.primitive,
                weight.primitive,
                Some(bias.primitive),
            )),
        },
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`channel_dot_with_own_kernels`]: both operands (checkpointed).
#[derive(Debug)]
struct ChannelDotBackward;

impl<B: CpuKernels> Backward<B, 2> for ChannelDotBackward {
    type State = (NodeId, NodeId);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [a_node, b_node] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let a = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(ops.state.0);
        let b = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(ops.state.1);
        // d(Σ_c a·b)/da = b (and the other way round), times the output's gradient per pixel.
        if let Some(node) = a_node {
            grads.register::<B>(node.id, B::scale_by_pixel(b, output_grad.clone()));
        }
        if let Some(node) = b_node {
            grads.register::<B>(node.id, B::scale_by_pixel(a, output_grad));
        }
    }
}

/// PagFM's channel dot product on `Autodiff<B>`, by `B`'s own kernels.
pub fn channel_dot_with_own_kernels<B: CpuKernels>(
    a: Tensor<Autodiff<B>, 4>,
    b: Tensor<Autodiff<B>, 4>,
) -> Tensor<Autodiff<B>, 4> {
    let [a, b] = [a, b].map(|t| t.into_primitive().tensor());
    let output = match ChannelDotBackward
        .prepare::<NoCheckpointing>([a.node.clone(), b.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let state = (prep.checkpoint(&a), prep.checkpoint(&b));
            prep.finish(state, B::channel_dot(a.primitive, b.primitive))
        }
        OpsKind::UnTracked(prep) => prep.finish(B::channel_dot(a.primitive, b.primitive)),
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward step of [`gate_blend_with_own_kernels`]: the three inputs (checkpointed).
#[derive(Debug)]
struct GateBlendBackward;

impl<B: CpuKernels> Backward<B, 3> for GateBlendBackward {
    type State = [NodeId; 3];

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let output_grad = grads.consume::<B>(&ops.node);
        let [x, y, s] = ops
            .state
            .map(|id| checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(id));
        let gradients = B::gate_blend_grad(x, y, s, output_grad);
        register_each::<B, 3>(
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
            grads,
        );
    }
}

/// PagFM's blend `x·(1 − s) + y·s` on `Autodiff<B>`, by `B`'s own kernels.
pub fn gate_blend_with_own_kernels<B: CpuKernels>(
    x: Tensor<Autodiff<B>, 4>,
    y: Tensor<Autodiff<B>, 4>,
    s: Tensor<Autodiff<B>, 4>,
) -> Tensor<Autodiff<B>, 4> {
    let [x, y, s] = [x, y, s].map(|t| t.into_primitive().tensor());
    let output = match GateBlendBackward
        .prepare::<NoCheckpointing>([x.node.clone(), y.node.clone(), s.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let state = [
                prep.checkpoint(&x),
                prep.checkpoint(&y),
                prep.checkpoint(&s),
            ];
            prep.finish(state, B::gate_blend(x.primitive, y.primitive, s.primitive))
        }
        OpsKind::UnTracked(prep) => {
            prep.finish(B::gate_blend(x.primitive, y.primitive, s.primitive))
        }
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

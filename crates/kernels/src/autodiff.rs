//! The ceremony every autodiff operation of ours shares, written once: an op says what its
//! forward pass keeps and how its gradients follow from that ([`OwnGradient`]); [`record`] runs
//! the forward kernel and, when an input is tracked, registers the op with Burn's autodiff
//! graph; the backward step reads back the checkpointed inputs, asks only for the gradients of
//! the inputs that need one, and registers them.

use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorPrimitive};
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::NoCheckpointing;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_autodiff::NodeId;

/// A tensor of `Autodiff<B>` as the autodiff graph sees it: the inner primitive and its node.
pub(crate) type Tracked<B> = FloatTensor<Autodiff<B>>;

/// The backward side of one of our ops with `N` inputs.
pub(crate) trait OwnGradient<B: Backend, const N: usize>:
    std::fmt::Debug + Send + Sized + 'static
{
    /// What the forward pass keeps besides the checkpointed inputs (shapes, options,
    /// statistics, intermediate tensors).
    type Kept: Clone + std::fmt::Debug + Send + 'static;

    /// The gradients of the inputs from the output's gradient: `inputs` are the checkpointed
    /// inputs in the order [`record`] was given them; `needed[i]` says whether input `i` wants a
    /// gradient (an op skips the work for the others and may return `None` there).
    fn gradients(
        self,
        inputs: Vec<FloatTensor<B>>,
        kept: Self::Kept,
        output_grad: FloatTensor<B>,
        needed: [bool; N],
    ) -> [Option<FloatTensor<B>>; N];
}

/// Burn's view of an [`OwnGradient`]: the state is the checkpointed inputs' ids and the kept
/// values.
#[derive(Debug)]
struct Step<Op>(Op);

impl<B: Backend, Op: OwnGradient<B, N>, const N: usize> Backward<B, N> for Step<Op> {
    type State = (Vec<NodeId>, Op::Kept);

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let output_grad = grads.consume::<B>(&ops.node);
        let (ids, kept) = ops.state;
        let inputs = ids
            .into_iter()
            .map(|id| checkpointer.retrieve_node_output::<FloatTensor<B>>(id))
            .collect();
        let needed = ops.parents.each_ref().map(Option::is_some);
        let gradients = self.0.gradients(inputs, kept, output_grad, needed);
        for (parent, grad) in ops.parents.into_iter().zip(gradients) {
            if let (Some(node), Some(grad)) = (parent, grad) {
                grads.register::<B>(node.id, grad);
            }
        }
    }
}

/// `forward` on the inputs' primitives, recorded as `op` in the autodiff graph when any input
/// is tracked: `checkpointed` lists (by index) the inputs the backward step reads back, and
/// `forward` returns the output and what the op keeps.
pub(crate) fn record<B: Backend, Op: OwnGradient<B, N>, const N: usize>(
    op: Op,
    inputs: [Tracked<B>; N],
    checkpointed: &[usize],
    forward: impl FnOnce([FloatTensor<B>; N]) -> (FloatTensor<B>, Op::Kept),
) -> Tracked<B> {
    let nodes = inputs.each_ref().map(|input| input.node.clone());
    match Step(op)
        .prepare::<NoCheckpointing>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) => {
            let ids = checkpointed
                .iter()
                .map(|&i| prep.checkpoint(&inputs[i]))
                .collect();
            let (output, kept) = forward(inputs.map(|input| input.primitive));
            prep.finish((ids, kept), output)
        }
        OpsKind::UnTracked(prep) => prep.finish(forward(inputs.map(|input| input.primitive)).0),
    }
}

/// The graph's view of a tensor of `Autodiff<B>`.
pub(crate) fn tracked<B: Backend, const D: usize>(tensor: Tensor<Autodiff<B>, D>) -> Tracked<B> {
    tensor.into_primitive().tensor()
}

/// A recorded output as a tensor again.
pub(crate) fn tensor<B: Backend, const D: usize>(output: Tracked<B>) -> Tensor<Autodiff<B>, D> {
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The checkpointed inputs as an array of the length the op checkpointed.
pub(crate) fn read_back<T, const K: usize>(inputs: Vec<T>) -> [T; K] {
    match inputs.try_into() {
        Ok(inputs) => inputs,
        Err(_) => unreachable!("an op reads back exactly the inputs it checkpointed"),
    }
}

//! Gradient accumulation: the gradients of one optimizer step summed over `micro_batches`
//! backward passes, each loss divided by the count so that equal-sized micro-batches give the
//! gradient of the full batch's mean loss (up to f32 summation order).

use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;

/// Runs `loss_of(model, k)` for `k in 0..micro_batches`, backpropagates each
/// `loss · scale / micro_batches`, and returns the summed gradients. A micro-batch whose loss is
/// `None` (nothing to learn from) adds nothing; `None` when none had a loss.
pub fn accumulate_gradients<B, M, E>(
    model: &M,
    micro_batches: usize,
    scale: f64,
    mut loss_of: impl FnMut(&M, usize) -> Result<Option<Tensor<B, 1>>, E>,
) -> Result<Option<GradientsParams>, E>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    let mut accumulator = GradientsAccumulator::<M>::new();
    let mut any = false;
    for k in 0..micro_batches {
        let Some(loss) = loss_of(model, k)? else {
            continue;
        };
        let objective = loss * (scale / micro_batches as f64);
        accumulator.accumulate(
            model,
            GradientsParams::from_grads(objective.backward(), model),
        );
        any = true;
    }
    Ok(any.then(|| accumulator.grads()))
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::module::{Module, Param};
    use burn::nn::conv::{Conv2d, Conv2dConfig};
    use burn::tensor::{Distribution, Tensor};

    use super::*;

    type AD = Autodiff<Flex>;

    /// A model without BatchNorm, so that batch statistics cannot differ between one batch
    /// and the same samples in micro-batches.
    #[derive(Module, Debug)]
    struct Tiny<B: burn::tensor::backend::Backend> {
        conv: Conv2d<B>,
        scale: Param<Tensor<B, 1>>,
    }

    fn loss(model: &Tiny<AD>, x: Tensor<AD, 4>) -> Tensor<AD, 1> {
        let y = burn::tensor::activation::relu(model.conv.forward(x))
            * model.scale.val().reshape([1, 1, 1, 1]);
        (y.clone() * y).mean()
    }

    #[test]
    fn two_micro_batches_of_two_equal_one_batch_of_four() {
        let device = Default::default();
        let model = Tiny::<AD> {
            conv: Conv2dConfig::new([3, 4], [3, 3]).init(&device),
            scale: Param::from_tensor(Tensor::from_floats([1.5], &device)),
        };
        let x = Tensor::<AD, 4>::random([4, 3, 8, 8], Distribution::Default, &device);
        let full =
            accumulate_gradients(&model, 1, 1.0, |m, _| Ok::<_, ()>(Some(loss(m, x.clone()))))
                .unwrap()
                .expect("one loss");
        let split = accumulate_gradients(&model, 2, 1.0, |m, k| {
            Ok::<_, ()>(Some(loss(
                m,
                x.clone().slice([2 * k..2 * k + 2, 0..3, 0..8, 0..8]),
            )))
        })
        .unwrap()
        .expect("two losses");
        let ids = [model.conv.weight.id, model.scale.id];
        let a: Tensor<Flex, 4> = full.get(ids[0]).unwrap();
        let b: Tensor<Flex, 4> = split.get(ids[0]).unwrap();
        let diff = (a.clone() - b).abs().max().into_scalar();
        let magnitude = a.abs().max().into_scalar();
        assert!(
            diff <= 1e-5 * magnitude,
            "conv weight gradients differ by {diff} (max {magnitude})"
        );
        let a: Tensor<Flex, 1> = full.get(ids[1]).unwrap();
        let b: Tensor<Flex, 1> = split.get(ids[1]).unwrap();
        assert!((a - b).abs().max().into_scalar() <= 1e-5);
        let nothing = accumulate_gradients(&model, 2, 1.0, |_, _| Ok::<_, ()>(None)).unwrap();
        assert!(nothing.is_none(), "no loss, no gradients");
    }
}

//! The loss family: the kernels of segburn's losses (the losses themselves live in
//! `segburn-train`). The cross-entropy's log-softmax gathered at the target class
//! (`class_log_probs.rs`: forward and gradient in two passes over the class planes, where
//! Burn's composition broadcasts its class sum's gradient element by element and scatters the
//! gather's), and the per-mask sums of SAM2's loss, focal, dice and IoU counts in one pass each
//! way (`mask_loss.rs`, `mask_pixels.rs`: the SAM2 bench step's loss forward went from 74 to
//! 5 ms).

mod autodiff;
mod class_log_probs;
mod flex;
mod mask_loss;
mod mask_pixels;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Int, Tensor};

pub use class_log_probs::{ClassPlanes, SoftmaxFloat};
pub use mask_loss::{mask_loss_sums_by_burn, Focal, MaskRows, MASK_LOSS_SUMS};

use crate::dispatch::{flex_primitive, from_flex, route, same_backend, CpuTraining, Route};

/// The loss kernels of a backend.
pub trait LossKernels: Backend {
    /// `log_softmax(x, dim=1)` of `[N, C, H, W]` logits at each pixel's class -> the `[N, H, W]`
    /// log-probabilities and the log-sum-exp per pixel (which the gradient reuses).
    fn class_log_probs(
        x: FloatTensor<Self>,
        classes: &[usize],
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// `dL/dx` of [`LossKernels::class_log_probs`] from the log-sum-exp and the output's
    /// gradient.
    fn class_log_probs_grad(
        x: FloatTensor<Self>,
        classes: &[usize],
        lse: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// The `[N, M, 6]` sums of [`mask_loss_sums`] for `[N, M, L]` logits and `[N, L]` targets.
    fn mask_loss_sums(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        focal: Focal,
    ) -> FloatTensor<Self>;

    /// `dL/dlogits` of [`LossKernels::mask_loss_sums`] from `dL/dsums`.
    fn mask_loss_sums_grad(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        focal: Focal,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
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
        (Route::OwnTraining, Some(classes)) => same_backend(autodiff::class_log_probs_tracked::<
            Flex,
        >(same_backend(x), classes)),
        (Route::OwnInference, Some(classes)) => {
            from_flex(Flex::class_log_probs(flex_primitive(x), &classes).0)
        }
        _ => {
            let log_sum_exp = x.clone().exp().sum_dim(1).log();
            (x.gather(1, index) - log_sum_exp).reshape([n, h, w])
        }
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

/// The per-mask sums of SAM2's mask losses: `[N, M, L]` mask logits against `[N, L]` targets
/// (each object's target shared by its `M` masks) -> `[N, M, 6]` = (Σ focal, Σ σ(x)·t, Σ σ(x),
/// Σ t, |x > 0 ∧ t > 0|, |x > 0 ∨ t > 0|). The gradient reaches the logits through the first
/// three sums (the counts are piecewise constant); the targets get none. By our kernels on the
/// CPU in f32/f64, by Burn's ops everywhere else.
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
        Route::Burn => mask_loss_sums_by_burn(logits, targets, focal),
        Route::OwnInference => from_flex(Flex::mask_loss_sums(
            flex_primitive(logits),
            flex_primitive(targets),
            focal,
        )),
        Route::OwnTraining => {
            let targets: Tensor<CpuTraining, 2> = same_backend(targets);
            same_backend(autodiff::mask_loss_sums_tracked::<Flex>(
                same_backend(logits),
                targets.inner(),
                focal,
            ))
        }
    }
}

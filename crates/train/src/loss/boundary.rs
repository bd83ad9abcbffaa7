//! PIDNet's boundary loss: class-balanced binary cross-entropy on the boundary head
//! (`BondaryLoss` in utils/criterion.py, `coeff_bce = 20`).

use burn::tensor::{activation::log_sigmoid, backend::Backend, Tensor};

use super::error::LossError;
use super::precision::{accurate_sum, to_loss_precision};

/// Class-balanced BCE with logits: `logits` `[N, 1, H, W]`, `target` `[N, H, W]` (1 = edge,
/// 0 = background) -> `[1]`.
///
/// As the official `weighted_bce`: over the whole batch, positives weigh `#neg / (#pos + #neg)`
/// and negatives `#pos / (#pos + #neg)`; pixels that are neither 0 nor 1 weigh 0; the mean is
/// over **all** `N·H·W` pixels. With no 0/1 pixel at all the official code divides 0 by 0
/// (NaN); here the loss is 0.
pub fn weighted_bce<B: Backend>(
    logits: Tensor<B, 4>,
    target: Tensor<B, 3>,
) -> Result<Tensor<B, 1>, LossError> {
    let [n, c, h, w] = logits.dims();
    if c != 1 || target.dims() != [n, h, w] {
        return Err(LossError::ShapeMismatch {
            what: "boundary logits [N, 1, H, W] vs boundary target [N, H, W]",
            expected: vec![n, 1, h, w],
            got: target.dims().to_vec(),
        });
    }
    let logits = to_loss_precision(logits).reshape([n, h, w]);
    let target = target.detach().cast(logits.dtype());

    // The class balance stays on the device (no sync). Counts summed in f32 are exact up to
    // 2^24 ≈ 16.7M pixels per batch; the official 12×1024×1024 batch has 12.6M.
    let positive = target.clone().equal_elem(1.0).float().cast(logits.dtype());
    let negative = target.clone().equal_elem(0.0).float().cast(logits.dtype());
    let num_pos = positive.clone().sum().reshape([1, 1, 1]);
    let num_neg = negative.clone().sum().reshape([1, 1, 1]);
    let total = (num_pos.clone() + num_neg.clone()).clamp_min(1.0);
    let weight = positive * (num_neg / total.clone()) + negative * (num_pos / total);

    // BCE with logits = softplus(x) − x·t, with softplus(x) = −log σ(−x) (Burn's stable
    // log-sigmoid, which has its own backward).
    let bce = log_sigmoid(logits.clone().neg()).neg() - logits * target;
    let count = (n * h * w).max(1) as f64;
    Ok(accurate_sum(bce * weight).div_scalar(count))
}

/// `coeff · weighted_bce` (the official coefficient is 20).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundaryLoss {
    /// Multiplier of the class-balanced BCE.
    pub coeff: f64,
}

impl Default for BoundaryLoss {
    fn default() -> Self {
        Self { coeff: 20.0 }
    }
}

impl BoundaryLoss {
    /// `[N, 1, H, W]` logits, `[N, H, W]` 0/1 target -> `[1]`.
    pub fn forward<B: Backend>(
        &self,
        logits: Tensor<B, 4>,
        target: Tensor<B, 3>,
    ) -> Result<Tensor<B, 1>, LossError> {
        Ok(weighted_bce(logits, target)?.mul_scalar(self.coeff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::test_support::*;
    use burn::tensor::TensorData;

    #[test]
    fn weighted_bce_and_coeff20_match_pytorch() {
        let fx = losses_fixture();
        let got = weighted_bce(fx_float::<4>(fx, "bd_logits"), fx_float::<3>(fx, "bd_gt")).unwrap();
        assert_scalar(got, fx, "weighted_bce", 1e-5);
        let got = BoundaryLoss::default()
            .forward(fx_float::<4>(fx, "bd_logits"), fx_float::<3>(fx, "bd_gt"))
            .unwrap();
        assert_scalar(got, fx, "boundary_loss_coeff20", 1e-5);
    }

    #[test]
    fn small_case_by_hand() {
        // 1 positive, 3 negatives: weights 3/4 and 1/4; logits 0 -> BCE ln 2 each.
        // mean = (3/4·ln2 + 3·1/4·ln2) / 4 = 3/8·ln 2.
        let device = device();
        let logits = Tensor::<B, 4>::zeros([1, 1, 2, 2], &device);
        let target = Tensor::<B, 3>::from_data(
            TensorData::new(vec![1.0f32, 0.0, 0.0, 0.0], [1, 2, 2]),
            &device,
        );
        let got = scalar(weighted_bce(logits, target).unwrap());
        assert_close(got, 3.0 / 8.0 * 2f64.ln(), 1e-6, "bce by hand");
    }

    #[test]
    fn empty_target_is_zero_not_nan() {
        let device = device();
        let logits = Tensor::<B, 4>::ones([1, 1, 2, 2], &device);
        let target = Tensor::<B, 3>::full([1, 2, 2], 0.5, &device);
        assert_eq!(scalar(weighted_bce(logits, target).unwrap()), 0.0);
    }

    #[test]
    fn wrong_shapes_are_an_error() {
        let device = device();
        let logits = Tensor::<B, 4>::zeros([1, 2, 2, 2], &device);
        let target = Tensor::<B, 3>::zeros([1, 2, 2], &device);
        assert!(matches!(
            weighted_bce(logits, target),
            Err(LossError::ShapeMismatch { .. })
        ));
    }
}

//! Cross-entropy with an ignore index and optional class weights.
//!
//! Burn's own `CrossEntropyLoss` cannot be used here: it gathers the target class before masking,
//! so label 255 with 19 classes reads out of range, and its mean counts ignored pixels.

use burn::tensor::{backend::Backend, Int, Tensor};
use segburn_kernels::class_log_probs;

use super::error::LossError;
use super::precision::{
    accurate_sum, connected_zero, host_coefficients, host_float, to_loss_precision,
};
use super::target::{check_class_weights, check_logits_target, PixelTargets};

/// Log-probability of the target class per pixel: logits `[N, C, H, W]`, gather index
/// `[N, 1, H, W]` -> `[N, H, W]`.
///
/// Burn's own `log_softmax` recipe (a detached max shift, then log-sum-exp, gathering before the
/// subtraction), computed by [`class_log_probs`]: segburn's kernel on the CPU, Burn's ops on
/// other backends.
pub(crate) fn target_log_probs<B: Backend>(
    logits: Tensor<B, 4>,
    index: Tensor<B, 4, Int>,
) -> Tensor<B, 3> {
    let max = logits.clone().detach().max_dim(1);
    shifted_target_log_probs(logits - max, index)
}

/// Like [`target_log_probs`] for logits already shifted by a per-pixel constant that keeps
/// `exp` from overflowing (log-softmax is invariant to the shift).
pub(crate) fn shifted_target_log_probs<B: Backend>(
    shifted: Tensor<B, 4>,
    index: Tensor<B, 4, Int>,
) -> Tensor<B, 3> {
    class_log_probs(shifted, index)
}

/// `Σ_i coef_i · (−log p_y(i))` for host coefficients (one per pixel) -> `[1]`.
pub(crate) fn weighted_nll_sum<B: Backend>(
    log_probs: Tensor<B, 3>,
    coef: impl Iterator<Item = f64>,
) -> Tensor<B, 1> {
    let coef = host_coefficients(
        coef,
        log_probs.dims(),
        &log_probs.device(),
        log_probs.dtype(),
    );
    accurate_sum(log_probs * coef).neg()
}

/// Per-pixel `w_y · CE`, 0 at ignored pixels: `[N, H, W]` (reduction `none`).
pub(crate) fn pixel_losses<B: Backend>(
    log_probs: Tensor<B, 3>,
    targets: &PixelTargets,
    class_weights: Option<&[f32]>,
) -> Tensor<B, 3> {
    let weights = targets.pixel_weights(class_weights);
    let weights = host_float(
        weights,
        log_probs.dims(),
        &log_probs.device(),
        log_probs.dtype(),
    );
    (log_probs * weights).neg()
}

/// PyTorch's weighted mean `Σ_valid w_y·CE / Σ_valid w_y` -> `[1]`; 0 (with a zero gradient)
/// when every pixel is ignored or the weights sum to 0.
pub(crate) fn weighted_mean<B: Backend>(
    log_probs: Tensor<B, 3>,
    targets: &PixelTargets,
    class_weights: Option<&[f32]>,
) -> Tensor<B, 1> {
    let weights = targets.pixel_weights(class_weights);
    let total: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    if total <= 0.0 {
        return connected_zero(log_probs);
    }
    let coef = weights.iter().map(|&w| f64::from(w) / total);
    weighted_nll_sum(log_probs, coef)
}

/// The official auxiliary reduction `Σ_valid w_y·CE / (N·H·W)` -> `[1]` (ignored pixels count
/// as 0 in the mean; see [`super::AuxReduction::AllPixels`]).
pub(crate) fn mean_over_all_pixels<B: Backend>(
    log_probs: Tensor<B, 3>,
    targets: &PixelTargets,
    class_weights: Option<&[f32]>,
) -> Tensor<B, 1> {
    let count = targets.labels().len().max(1) as f64;
    let weights = targets.pixel_weights(class_weights);
    let coef = weights.iter().map(|&w| f64::from(w) / count);
    weighted_nll_sum(log_probs, coef)
}

/// Cross-entropy over `[N, C, H, W]` logits and `[N, H, W]` integer targets.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossEntropyLoss {
    /// Target value that contributes nothing (default 255).
    pub ignore_index: i64,
    /// Optional weight per class (length C).
    pub class_weights: Option<Vec<f32>>,
}

impl Default for CrossEntropyLoss {
    fn default() -> Self {
        Self::new(255)
    }
}

impl CrossEntropyLoss {
    /// Unweighted cross-entropy ignoring `ignore_index`.
    pub fn new(ignore_index: i64) -> Self {
        Self {
            ignore_index,
            class_weights: None,
        }
    }

    /// Sets one weight per class.
    pub fn with_class_weights(mut self, weights: Vec<f32>) -> Self {
        self.class_weights = Some(weights);
        self
    }

    /// Reduction `none`: `[N, C, H, W]`, `[N, H, W]` -> `[N, H, W]` of `w_y·CE`, 0 where ignored.
    pub fn forward_none<B: Backend>(
        &self,
        logits: Tensor<B, 4>,
        target: Tensor<B, 3, Int>,
    ) -> Result<Tensor<B, 3>, LossError> {
        let (log_probs, targets) = self.prepare(logits, target)?;
        Ok(pixel_losses(
            log_probs,
            &targets,
            self.class_weights.as_deref(),
        ))
    }

    /// Reduction `mean` with PyTorch semantics: `Σ w_y·CE / Σ w_y` over non-ignored pixels
    /// -> `[1]`. An all-ignored batch gives 0 with a zero gradient.
    pub fn forward_mean<B: Backend>(
        &self,
        logits: Tensor<B, 4>,
        target: Tensor<B, 3, Int>,
    ) -> Result<Tensor<B, 1>, LossError> {
        let (log_probs, targets) = self.prepare(logits, target)?;
        Ok(weighted_mean(
            log_probs,
            &targets,
            self.class_weights.as_deref(),
        ))
    }

    /// The official PIDNet auxiliary reduction, `Σ_valid w_y·CE / (N·H·W)` -> `[1]`
    /// (`_ce_forward(...).mean()`).
    pub fn forward_mean_over_all_pixels<B: Backend>(
        &self,
        logits: Tensor<B, 4>,
        target: Tensor<B, 3, Int>,
    ) -> Result<Tensor<B, 1>, LossError> {
        let (log_probs, targets) = self.prepare(logits, target)?;
        Ok(mean_over_all_pixels(
            log_probs,
            &targets,
            self.class_weights.as_deref(),
        ))
    }

    fn prepare<B: Backend>(
        &self,
        logits: Tensor<B, 4>,
        target: Tensor<B, 3, Int>,
    ) -> Result<(Tensor<B, 3>, PixelTargets), LossError> {
        let num_classes = logits.dims()[1];
        check_logits_target(logits.dims(), target.dims())?;
        check_class_weights(self.class_weights.as_deref(), num_classes)?;
        let targets = PixelTargets::from_tensor(target, num_classes, self.ignore_index)?;
        let logits = to_loss_precision(logits);
        let index = targets.gather_index(&logits.device());
        Ok((target_log_probs(logits, index), targets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute_threads::on_compute_pool;
    use crate::loss::test_support::*;
    use burn::tensor::{FloatDType, TensorData};

    #[test]
    fn ce_weighted_mean_matches_pytorch() {
        let fx = losses_fixture();
        let loss = CrossEntropyLoss::new(255).with_class_weights(class_weights(fx));
        let got = loss
            .forward_mean(fx_float::<4>(fx, "logits"), fx_int(fx, "target"))
            .unwrap();
        assert_scalar(got, fx, "ce_weighted_mean", 1e-5);
    }

    #[test]
    fn ce_none_mean_matches_every_variant() {
        let fx = losses_fixture();
        for (key, weighted) in fixture_variants(fx, "ce_none_mean.") {
            let mut loss = CrossEntropyLoss::new(255);
            if weighted {
                loss = loss.with_class_weights(class_weights(fx));
            }
            let logits = fx_float::<4>(fx, "logits");
            let per_pixel = loss
                .forward_none(logits.clone(), fx_int(fx, "target"))
                .unwrap();
            assert_eq!(per_pixel.dims(), [2, 64, 128]);
            assert_scalar(per_pixel.mean(), fx, &key, 1e-5);
            let all = loss
                .forward_mean_over_all_pixels(logits, fx_int(fx, "target"))
                .unwrap();
            assert_scalar(all, fx, &key, 1e-5);
        }
    }

    #[test]
    fn half_precision_logits_are_computed_in_f32() {
        let fx = losses_fixture();
        let loss = CrossEntropyLoss::new(255).with_class_weights(class_weights(fx));
        let logits = fx_float::<4>(fx, "logits").cast(FloatDType::BF16);
        let got = loss.forward_mean(logits, fx_int(fx, "target")).unwrap();
        assert_eq!(got.dtype(), burn::tensor::DType::F32);
        // bf16 rounding of the logits (8 bits of mantissa) moves the loss by ~1e-3 at most.
        assert_scalar(got, fx, "ce_weighted_mean", 5e-3);
    }

    #[test]
    fn wrong_length_class_weights_is_a_clear_error() {
        let fx = losses_fixture();
        let loss = CrossEntropyLoss::new(255).with_class_weights(vec![1.0; 20]);
        let err = loss
            .forward_mean(fx_float::<4>(fx, "logits"), fx_int(fx, "target"))
            .unwrap_err();
        assert_eq!(
            err,
            LossError::ClassWeightsLength {
                expected: 19,
                got: 20
            }
        );
        assert!(err.to_string().contains("20 entries"), "{err}");
    }

    #[test]
    fn out_of_range_target_is_an_error_not_a_panic() {
        let device = device();
        let logits = Tensor::<B, 4>::zeros([1, 3, 2, 2], &device);
        let target = Tensor::<B, 3, Int>::from_data(
            TensorData::new(vec![0i64, 1, 7, 255], [1, 2, 2]),
            &device,
        );
        let err = CrossEntropyLoss::new(255)
            .forward_mean(logits, target)
            .unwrap_err();
        assert!(
            matches!(
                err,
                LossError::TargetOutOfRange {
                    value: 7,
                    count: 1,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn all_ignored_mean_is_zero_with_zero_gradient() {
        let device = device();
        let logits =
            Tensor::<AD, 4>::random([2, 3, 4, 4], burn::tensor::Distribution::Default, &device)
                .require_grad();
        let target = Tensor::<AD, 3, Int>::full([2, 4, 4], 255, &device);
        let loss = CrossEntropyLoss::new(255)
            .forward_mean(logits.clone(), target)
            .unwrap();
        assert_eq!(scalar(loss.clone()), 0.0);
        let grads = on_compute_pool(|| loss.backward());
        let grad = logits
            .grad(&grads)
            .expect("logits are connected to the graph");
        assert!(grad.into_data().iter::<f32>().all(|g| g == 0.0));
    }

    #[test]
    fn small_case_by_hand() {
        // Two pixels, 2 classes: logits (0, ln 3) -> p = (1/4, 3/4). Targets 1 and 0, weights
        // (2, 1): mean = (1·(−ln 3/4) + 2·(−ln 1/4)) / 3.
        let device = device();
        let logits = Tensor::<B, 4>::from_data(
            TensorData::new(vec![0.0f32, 0.0, 3f32.ln(), 3f32.ln()], [1, 2, 1, 2]),
            &device,
        );
        let target =
            Tensor::<B, 3, Int>::from_data(TensorData::new(vec![1i64, 0], [1, 1, 2]), &device);
        let loss = CrossEntropyLoss::new(255).with_class_weights(vec![2.0, 1.0]);
        let got = scalar(loss.forward_mean(logits, target).unwrap());
        let want = (-(0.75f64).ln() + 2.0 * -(0.25f64).ln()) / 3.0;
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
}

//! Online hard example mining cross-entropy, as the official `OhemCrossEntropy._ohem_forward`.
//!
//! Official recipe (utils/criterion.py), over the whole batch flattened:
//! `p = softmax(score)[y]` for valid pixels, sorted ascending;
//! `threshold = max(p[min(min_kept, n − 1)], thresh)`; the loss is the plain mean of the
//! class-weighted per-pixel CE of the pixels with `p < threshold` (strict).
//!
//! Differences, all on degenerate inputs only:
//! - a k-th element selection (`select_nth_unstable_by`, O(n)) replaces the full sort; the
//!   threshold is the same value;
//! - no valid pixel (official: `IndexError`, PIDNet issues #14/#42/#65/#68) or no kept pixel
//!   (official: NaN) gives a loss of 0 with a zero gradient.

use burn::tensor::{backend::Backend, Int, Tensor};

use super::config::OhemConfig;
use super::cross_entropy::{target_log_probs, weighted_nll_sum};
use super::error::LossError;
use super::precision::{connected_zero, download_f32, to_loss_precision};
use super::target::{check_class_weights, check_logits_target, PixelTargets};

/// OHEM from precomputed target log-probabilities `[N, H, W]` -> `[1]`.
///
/// `log_probs_host` is the host copy of `log_probs` (so that the PIDNet composite downloads the
/// main head once for both the OHEM and the boundary-aware term).
pub(crate) fn ohem_from_log_probs<B: Backend>(
    log_probs: Tensor<B, 3>,
    log_probs_host: &[f32],
    targets: &PixelTargets,
    class_weights: Option<&[f32]>,
    config: &OhemConfig,
) -> Tensor<B, 1> {
    let min_kept = config.min_kept.max(1);
    // The official code compares f32 probabilities from `softmax`; exp(log p) agrees to an ulp.
    let probs: Vec<f32> = log_probs_host.iter().map(|lp| lp.exp()).collect();
    let mut valid: Vec<f32> = (0..probs.len())
        .filter(|&i| targets.class_at(i).is_some())
        .map(|i| probs[i])
        .collect();
    if valid.is_empty() {
        return connected_zero(log_probs);
    }
    let k = min_kept.min(valid.len() - 1);
    let (_, kth, _) = valid.select_nth_unstable_by(k, f32::total_cmp);
    let threshold = kth.max(config.thresh);

    let kept = |i: usize| targets.class_at(i).filter(|_| probs[i] < threshold);
    let count = (0..probs.len()).filter(|&i| kept(i).is_some()).count();
    if count == 0 {
        return connected_zero(log_probs);
    }
    let scale = 1.0 / count as f64;
    let coef = (0..probs.len()).map(|i| match kept(i) {
        None => 0.0,
        Some(c) => class_weights.map_or(1.0, |w| f64::from(w[c])) * scale,
    });
    weighted_nll_sum(log_probs, coef)
}

/// OHEM cross-entropy over `[N, C, H, W]` logits and `[N, H, W]` integer targets.
#[derive(Debug, Clone, PartialEq)]
pub struct OhemCrossEntropy {
    /// Target value that contributes nothing (default 255).
    pub ignore_index: i64,
    /// Optional weight per class (length C); multiplies each pixel's loss, but the final
    /// reduction is an unweighted mean over the kept pixels (as the official code).
    pub class_weights: Option<Vec<f32>>,
    /// Threshold and minimum number of kept pixels.
    pub config: OhemConfig,
}

impl Default for OhemCrossEntropy {
    fn default() -> Self {
        Self::new(255, OhemConfig::default())
    }
}

impl OhemCrossEntropy {
    /// OHEM without class weights.
    pub fn new(ignore_index: i64, config: OhemConfig) -> Self {
        Self {
            ignore_index,
            class_weights: None,
            config,
        }
    }

    /// Sets one weight per class.
    pub fn with_class_weights(mut self, weights: Vec<f32>) -> Self {
        self.class_weights = Some(weights);
        self
    }

    /// `[N, C, H, W]`, `[N, H, W]` -> `[1]`.
    pub fn forward<B: Backend>(
        &self,
        logits: Tensor<B, 4>,
        target: Tensor<B, 3, Int>,
    ) -> Result<Tensor<B, 1>, LossError> {
        let num_classes = logits.dims()[1];
        check_logits_target(logits.dims(), target.dims())?;
        check_class_weights(self.class_weights.as_deref(), num_classes)?;
        let targets = PixelTargets::from_tensor(target, num_classes, self.ignore_index)?;
        Ok(self.forward_targets(logits, &targets))
    }

    /// Like [`forward`](Self::forward) with already validated targets.
    pub(crate) fn forward_targets<B: Backend>(
        &self,
        logits: Tensor<B, 4>,
        targets: &PixelTargets,
    ) -> Tensor<B, 1> {
        let logits = to_loss_precision(logits);
        let log_probs = target_log_probs(logits.clone(), targets.gather_index(&logits.device()));
        let host = download_f32(log_probs.clone());
        ohem_from_log_probs(
            log_probs,
            &host,
            targets,
            self.class_weights.as_deref(),
            &self.config,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute_threads::on_compute_pool;
    use crate::loss::test_support::*;
    use burn::tensor::TensorData;

    #[test]
    fn every_ohem_variant_matches_pytorch() {
        let fx = losses_fixture();
        for v in variants(fx, "ohem.") {
            let config = OhemConfig {
                thresh: v.thresh,
                min_kept: v.min_kept,
            };
            let mut loss = OhemCrossEntropy::new(255, config);
            if v.weighted {
                loss = loss.with_class_weights(class_weights(fx));
            }
            let got = loss
                .forward(fx_float::<4>(fx, "logits"), fx_int(fx, "target"))
                .unwrap();
            assert_scalar(got, fx, &v.key, 1e-5);
        }
    }

    #[test]
    fn min_kept_forces_the_hardest_pixels_in() {
        // p_y of the three valid pixels: 0.95, 0.97, 0.99 (all above thresh 0.9). With
        // min_kept 1 the threshold is the 2nd smallest (0.97): only the 0.95 pixel is kept.
        let device = device();
        let logit = |p: f32| (p / (1.0 - p)).ln();
        let (a, b, c) = (logit(0.95), logit(0.97), logit(0.99));
        let logits = Tensor::<B, 4>::from_data(
            TensorData::new(vec![a, b, c, 0.0, 0.0, 0.0, 0.0, 0.0], [1, 2, 1, 4]),
            &device,
        );
        let target = Tensor::<B, 3, Int>::from_data(
            TensorData::new(vec![0i64, 0, 0, 255], [1, 1, 4]),
            &device,
        );
        let config = OhemConfig {
            thresh: 0.9,
            min_kept: 1,
        };
        let got = scalar(
            OhemCrossEntropy::new(255, config)
                .forward(logits, target)
                .unwrap(),
        );
        assert_close(got, -(0.95f64).ln(), 1e-5, "ohem min_kept 1");
    }

    #[test]
    fn no_valid_or_no_kept_pixel_is_zero_with_zero_gradient() {
        let device = device();
        for (target_value, big_logit) in [(255i64, 0.0f32), (0, 50.0)] {
            // Either everything is ignored, or the single valid pixel has p = 1 ≥ threshold.
            let mut values = vec![0.0f32; 2 * 3 * 2 * 2];
            values[0] = big_logit;
            let logits = Tensor::<AD, 4>::from_data(TensorData::new(values, [2, 3, 2, 2]), &device)
                .require_grad();
            let mut labels = vec![255i64; 8];
            labels[0] = target_value;
            let target =
                Tensor::<AD, 3, Int>::from_data(TensorData::new(labels, [2, 2, 2]), &device);
            let config = OhemConfig {
                thresh: 0.9,
                min_kept: 1,
            };
            let loss = OhemCrossEntropy::new(255, config)
                .forward(logits.clone(), target)
                .unwrap();
            let value = scalar(loss.clone());
            assert_eq!(value, 0.0);
            let grad = logits
                .grad(&on_compute_pool(|| loss.backward()))
                .expect("connected to the graph");
            assert!(grad.into_data().iter::<f32>().all(|g| g == 0.0));
        }
    }

    #[test]
    fn wrong_length_class_weights_is_a_clear_error() {
        let fx = losses_fixture();
        let loss = OhemCrossEntropy::default().with_class_weights(vec![1.0; 18]);
        let err = loss
            .forward(fx_float::<4>(fx, "logits"), fx_int(fx, "target"))
            .unwrap_err();
        assert_eq!(
            err,
            LossError::ClassWeightsLength {
                expected: 19,
                got: 18
            }
        );
    }
}

//! Boundary-aware semantic loss (BAS, "SB loss" in the official logs).
//!
//! `bd_label = where(sigmoid(boundary) > 0.8, labels, 255)`, then OHEM of the main head on
//! `bd_label`. The gate is not differentiable: the gradient flows through the main head only.

use burn::tensor::{backend::Backend, Int, Tensor};

use super::config::OhemConfig;
use super::error::LossError;
use super::ohem::OhemCrossEntropy;
use super::precision::{download_f32, download_i64, host_int};
use super::target::{check_class_weights, check_logits_target, PixelTargets};

/// `sigmoid(x) > threshold` in f32, as PyTorch evaluates it (strict; computed from the logit
/// the same way rather than via `x > logit(threshold)`, so ties round identically).
#[inline]
fn gate_open(logit: f32, threshold: f32) -> bool {
    1.0 / (1.0 + (-logit).exp()) > threshold
}

/// Gates validated targets with the host boundary logits (`N·H·W` values).
pub(crate) fn gate_targets(
    boundary_host: &[f32],
    targets: &PixelTargets,
    threshold: f32,
) -> PixelTargets {
    targets.retain(|i| gate_open(boundary_host[i], threshold))
}

/// `boundary` logits `[N, 1, H, W]`, `target` `[N, H, W]` -> `[N, H, W]`: the target where
/// `sigmoid(boundary) > threshold`, else `ignore_index`.
pub fn boundary_gated_targets<B: Backend>(
    boundary: Tensor<B, 4>,
    target: Tensor<B, 3, Int>,
    threshold: f32,
    ignore_index: i64,
) -> Result<Tensor<B, 3, Int>, LossError> {
    let [n, c, h, w] = boundary.dims();
    if c != 1 || target.dims() != [n, h, w] {
        return Err(LossError::ShapeMismatch {
            what: "boundary logits [N, 1, H, W] vs target [N, H, W]",
            expected: vec![n, 1, h, w],
            got: target.dims().to_vec(),
        });
    }
    let device = target.device();
    let gate = download_f32(boundary);
    let labels = download_i64(target)
        .into_iter()
        .zip(gate)
        .map(|(y, b)| {
            if gate_open(b, threshold) {
                y
            } else {
                ignore_index
            }
        })
        .collect();
    Ok(host_int(labels, [n, h, w], &device))
}

/// OHEM of the main head on boundary-gated labels.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundaryAwareLoss {
    /// The OHEM applied to the gated labels (ignore index, class weights, thresholds).
    pub ohem: OhemCrossEntropy,
    /// Labels are kept where `sigmoid(boundary) > threshold` (official 0.8).
    pub threshold: f32,
}

impl Default for BoundaryAwareLoss {
    fn default() -> Self {
        Self {
            ohem: OhemCrossEntropy::new(255, OhemConfig::default()),
            threshold: 0.8,
        }
    }
}

impl BoundaryAwareLoss {
    /// `main` `[N, C, H, W]`, `boundary` `[N, 1, H, W]`, `target` `[N, H, W]` -> `[1]`.
    pub fn forward<B: Backend>(
        &self,
        main: Tensor<B, 4>,
        boundary: Tensor<B, 4>,
        target: Tensor<B, 3, Int>,
    ) -> Result<Tensor<B, 1>, LossError> {
        let [n, num_classes, h, w] = main.dims();
        check_logits_target(main.dims(), target.dims())?;
        if boundary.dims() != [n, 1, h, w] {
            return Err(LossError::ShapeMismatch {
                what: "boundary logits vs main logits",
                expected: vec![n, 1, h, w],
                got: boundary.dims().to_vec(),
            });
        }
        check_class_weights(self.ohem.class_weights.as_deref(), num_classes)?;
        let targets = PixelTargets::from_tensor(target, num_classes, self.ohem.ignore_index)?;
        let gated = gate_targets(&download_f32(boundary), &targets, self.threshold);
        Ok(self.ohem.forward_targets(main, &gated))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::test_support::*;

    #[test]
    fn gated_targets_match_pytorch_exactly() {
        let fx = losses_fixture();
        let got = boundary_gated_targets(
            fx_float::<4>(fx, "bd_logits"),
            fx_int(fx, "target"),
            0.8,
            255,
        )
        .unwrap();
        let got: Vec<i64> = got.into_data().iter::<i64>().collect();
        let want: Vec<i64> = fx.data("bas_target").unwrap().iter::<i64>().collect();
        let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        let kept = want.iter().filter(|&&v| v != 255).count();
        println!(
            "parity bas_target: {differ} of {} labels differ ({kept} kept)",
            want.len()
        );
        assert_eq!(differ, 0);
        assert!(
            kept > 0 && kept < want.len(),
            "the gate must keep some labels, not all"
        );
    }

    #[test]
    fn bas_ohem_matches_pytorch() {
        let fx = losses_fixture();
        let loss = BoundaryAwareLoss {
            ohem: OhemCrossEntropy::default().with_class_weights(class_weights(fx)),
            threshold: 0.8,
        };
        let got = loss
            .forward(
                fx_float::<4>(fx, "logits"),
                fx_float::<4>(fx, "bd_logits"),
                fx_int(fx, "target"),
            )
            .unwrap();
        assert_scalar(got, fx, "bas_ohem", 1e-5);
    }
}

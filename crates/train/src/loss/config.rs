//! Serde configuration of the segmentation losses, embedded in the RON experiment file.
//!
//! Every default lives in the `Default` impls below and mirrors the official PIDNet Cityscapes
//! recipe (`configs/cityscapes/pidnet_small_cityscapes.yaml` + `utils/criterion.py`).

use serde::{Deserialize, Serialize};

use super::class_weights::ClassWeights;
use super::error::LossError;

/// The official Cityscapes class weights (`datasets/cityscapes.py`), in trainId order.
pub const CITYSCAPES_CLASS_WEIGHTS: [f32; 19] = [
    0.8373, 0.918, 0.866, 1.0345, 1.0166, 0.9969, 0.9754, 1.0489, 0.8786, 1.0023, 0.9539, 0.9843,
    1.1116, 0.9037, 1.0865, 1.0955, 1.0865, 1.1529, 1.0507,
];

/// Online hard example mining (OHEM) parameters (`OHEMTHRES`, `OHEMKEEP`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OhemConfig {
    /// Probability threshold: pixels whose target-class probability is below
    /// `max(thresh, p_k)` are kept.
    pub thresh: f32,
    /// At least this many pixels are kept (the k of `p_k`), counted over the whole batch.
    /// The official code uses `max(1, min_kept)`; so do we.
    pub min_kept: usize,
}

impl Default for OhemConfig {
    fn default() -> Self {
        Self {
            thresh: 0.9,
            min_kept: 131_072,
        }
    }
}

/// How the auxiliary (P-branch) cross-entropy term is reduced to a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum AuxReduction {
    /// The official behaviour: `Σ_valid w_y·CE / (N·H·W)`. `_ce_forward` returns a per-pixel
    /// tensor (ignored pixels are 0) that the training loop averages over *all* pixels, so the
    /// term shrinks with the fraction of ignored pixels and is not a weighted mean
    /// (PIDNet issue #71, never fixed). Reproduces the published recipe.
    #[default]
    AllPixels,
    /// PyTorch's `nn.CrossEntropyLoss` mean: `Σ_valid w_y·CE / Σ_valid w_y`.
    ValidWeightedMean,
}

/// The PIDNet training loss (`FullModel` with `OhemCrossEntropy` and `BondaryLoss`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PidNetLossConfig {
    /// Label value that contributes nothing to any loss. Not part of an experiment file: the
    /// training task sets it from `data.ignore_index`, the one owner of that value.
    #[serde(skip)]
    pub ignore_index: i64,
    /// One weight per class multiplying each pixel's cross-entropy: `Uniform` (all 1),
    /// `Explicit([..])` (the official Cityscapes recipe uses [`CITYSCAPES_CLASS_WEIGHTS`]) or
    /// `FromData(..)`, computed from the training split when a run starts.
    pub class_weights: ClassWeights,
    /// OHEM parameters of the main and boundary-aware terms.
    pub ohem: OhemConfig,
    /// `BALANCE_WEIGHTS`: weights of the auxiliary (P-branch) and main terms. The loss weights
    /// are f64 so that an f64 run multiplies by the value written (0.4f32 is 1.5e-8 off 0.4).
    pub balance_weights: [f64; 2],
    /// Reduction of the auxiliary term.
    pub aux_reduction: AuxReduction,
    /// Coefficient of the class-balanced boundary BCE (`coeff_bce`).
    pub boundary_coeff: f64,
    /// Boundary-aware semantic loss: labels are kept where `sigmoid(boundary) > bas_threshold`.
    pub bas_threshold: f32,
    /// `SB_WEIGHTS`: weight of the boundary-aware semantic term.
    pub bas_weight: f64,
    /// Upsample the 1/8-resolution outputs to the label size (bilinear, `align_corners=true`,
    /// as the official `FullModel`). When false, outputs must already match the labels.
    pub upsample_to_labels: bool,
}

impl Default for PidNetLossConfig {
    fn default() -> Self {
        Self {
            ignore_index: 255,
            class_weights: ClassWeights::Uniform,
            ohem: OhemConfig::default(),
            balance_weights: [0.4, 1.0],
            aux_reduction: AuxReduction::AllPixels,
            boundary_coeff: 20.0,
            bas_threshold: 0.8,
            bas_weight: 1.0,
            upsample_to_labels: true,
        }
    }
}

impl PidNetLossConfig {
    /// Checks the values that do not depend on the data (class-weight *length* is checked
    /// against the logits at the first call).
    pub fn check(&self) -> Result<(), LossError> {
        let finite = |name: &str, v: f64| {
            if v.is_finite() {
                Ok(())
            } else {
                Err(LossError::InvalidConfig(format!(
                    "{name} must be finite, got {v}"
                )))
            }
        };
        finite("ohem.thresh", f64::from(self.ohem.thresh))?;
        finite("balance_weights[0]", self.balance_weights[0])?;
        finite("balance_weights[1]", self.balance_weights[1])?;
        finite("boundary_coeff", self.boundary_coeff)?;
        finite("bas_weight", self.bas_weight)?;
        if !(self.bas_threshold > 0.0 && self.bas_threshold < 1.0) {
            return Err(LossError::InvalidConfig(format!(
                "bas_threshold is a probability in (0, 1), got {}",
                self.bas_threshold
            )));
        }
        self.class_weights.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_official_recipe() {
        let c = PidNetLossConfig::default();
        assert_eq!(c.ignore_index, 255);
        assert_eq!(c.ohem.thresh, 0.9);
        assert_eq!(c.ohem.min_kept, 131_072);
        assert_eq!(c.balance_weights, [0.4, 1.0]);
        assert_eq!(c.boundary_coeff, 20.0);
        assert_eq!(c.bas_threshold, 0.8);
        assert_eq!(c.bas_weight, 1.0);
        assert_eq!(c.aux_reduction, AuxReduction::AllPixels);
        assert!(c.check().is_ok());
    }

    /// The ignore index is the data's: an experiment file cannot give the loss another one.
    #[test]
    fn the_ignore_index_is_not_part_of_the_section() {
        let text = ron::ser::to_string(&PidNetLossConfig::default()).expect("serialises");
        assert!(!text.contains("ignore_index"), "{text}");
        let error =
            ron::de::from_str::<PidNetLossConfig>("(ignore_index: 0)").expect_err("unknown");
        assert!(error.to_string().contains("ignore_index"), "{error}");
    }

    #[test]
    fn partial_json_fills_defaults_and_unknown_fields_fail() {
        let c: PidNetLossConfig = serde_json::from_str(
            r#"{"ohem": {"min_kept": 1000}, "aux_reduction": "ValidWeightedMean"}"#,
        )
        .unwrap();
        assert_eq!(c.ohem.min_kept, 1000);
        assert_eq!(c.ohem.thresh, 0.9);
        assert_eq!(c.aux_reduction, AuxReduction::ValidWeightedMean);
        let err = serde_json::from_str::<PidNetLossConfig>(r#"{"ohem_tresh": 0.7}"#).unwrap_err();
        assert!(err.to_string().contains("ohem_tresh"), "{err}");
    }

    #[test]
    fn bad_values_are_rejected() {
        let c = PidNetLossConfig {
            class_weights: ClassWeights::Explicit(vec![1.0, -2.0]),
            ..Default::default()
        };
        assert!(matches!(c.check(), Err(LossError::InvalidConfig(m)) if m.contains("[1]")));
        let c = PidNetLossConfig {
            bas_threshold: 1.5,
            ..Default::default()
        };
        assert!(c.check().is_err());
    }
}

//! The per-class weights of the PIDNet cross-entropy terms: none, given, or computed once from
//! the class pixel counts of the training split.
//!
//! The formula is ENet's (Paszke et al., 2016, section 5.2): `w_c = 1 / ln(c + p_c)`, where
//! `p_c` is class `c`'s share of the labelled (non-ignored) pixels of the training split and
//! `c = 1.02` by default. Weights therefore lie between `1 / ln(1 + c)` (≈ 1.42 for a class
//! covering every pixel) and `1 / ln(c)` (≈ 50.5 for an absent class): rare classes weigh more,
//! but never without bound.

use serde::{Deserialize, Serialize};

use super::error::LossError;

/// How much each class's pixels count in the cross-entropy terms.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub enum ClassWeights {
    /// Every class weighs 1 (`None` reads as this too).
    #[default]
    #[serde(alias = "None")]
    Uniform,
    /// One weight per class, in training-id order (`Some([..])` reads as this too). The
    /// official Cityscapes recipe uses [`super::CITYSCAPES_CLASS_WEIGHTS`].
    #[serde(alias = "Some")]
    Explicit(Vec<f32>),
    /// Computed from the training split by `formula` when a run starts, and recorded in
    /// `computed` (so the run's resolved experiment and its checkpoints carry the numbers
    /// used). `FromData()` takes the default formula.
    FromData {
        #[serde(default)]
        formula: WeightFormula,
        /// Written by segburn at the start of training (a value given here is recomputed).
        #[serde(default)]
        computed: Option<Vec<f32>>,
    },
}

/// A rule from class pixel counts to class weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WeightFormula {
    /// ENet: `w_c = 1 / ln(c + p_c)` with `p_c` the class's share of labelled pixels.
    InverseLogFrequency { c: f64 },
}

impl Default for WeightFormula {
    fn default() -> Self {
        WeightFormula::InverseLogFrequency { c: 1.02 }
    }
}

impl WeightFormula {
    /// The weights for these per-class pixel counts (training-id order).
    pub fn weights(&self, class_pixels: &[u64]) -> Result<Vec<f32>, LossError> {
        self.check()?;
        let WeightFormula::InverseLogFrequency { c } = *self;
        let total: u64 = class_pixels.iter().sum();
        if total == 0 {
            return Err(LossError::InvalidConfig(
                "class_weights: FromData found no labelled pixel in the training split".into(),
            ));
        }
        Ok(class_pixels
            .iter()
            .map(|&n| (1.0 / (c + n as f64 / total as f64).ln()) as f32)
            .collect())
    }

    fn check(&self) -> Result<(), LossError> {
        let WeightFormula::InverseLogFrequency { c } = *self;
        if c.is_finite() && c > 1.0 {
            Ok(())
        } else {
            Err(LossError::InvalidConfig(format!(
                "class_weights: InverseLogFrequency needs c > 1 (ln(c + p) must stay positive), \
                 got {c}"
            )))
        }
    }
}

impl ClassWeights {
    /// The weights the loss uses (`None`: all 1, or not computed yet).
    pub fn values(&self) -> Option<&[f32]> {
        match self {
            ClassWeights::Uniform => None,
            ClassWeights::Explicit(weights) => Some(weights.as_slice()),
            ClassWeights::FromData { computed, .. } => computed.as_deref(),
        }
    }

    /// Whether the weights still have to be computed from the training split.
    pub fn needs_data(&self) -> bool {
        matches!(self, ClassWeights::FromData { computed: None, .. })
    }

    /// Computes `FromData` weights from the training split's per-class pixel counts (other
    /// kinds of weights are left as they are).
    pub fn compute(&mut self, class_pixels: &[u64]) -> Result<(), LossError> {
        if let ClassWeights::FromData { formula, computed } = self {
            *computed = Some(formula.weights(class_pixels)?);
        }
        Ok(())
    }

    /// Checks the values that do not depend on the data.
    pub(crate) fn check(&self) -> Result<(), LossError> {
        if let ClassWeights::FromData { formula, .. } = self {
            formula.check()?;
        }
        match self.values() {
            Some(weights) => check_weight_values(weights),
            None => Ok(()),
        }
    }
}

/// Class weights must be finite and non-negative.
fn check_weight_values(weights: &[f32]) -> Result<(), LossError> {
    match weights.iter().position(|w| !w.is_finite() || *w < 0.0) {
        Some(i) => Err(LossError::InvalidConfig(format!(
            "class_weights[{i}] = {} (weights must be finite and >= 0)",
            weights[i]
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_log_frequency_follows_the_enet_formula() {
        let formula = WeightFormula::default();
        // 70 %, 25 %, 5 % and an absent class.
        let weights = formula.weights(&[700, 250, 50, 0]).expect("pixels");
        let expected = [0.7f64, 0.25, 0.05, 0.0].map(|p| (1.0 / (1.02 + p).ln()) as f32);
        assert_eq!(weights, expected);
        assert!((weights[0] - 1.8439).abs() < 1e-3, "{weights:?}");
        assert!((weights[3] - 50.498).abs() < 1e-2, "{weights:?}");
        assert!(weights.windows(2).all(|w| w[0] < w[1]), "rarer weighs more");
        assert!(formula.weights(&[0, 0]).is_err());
        assert!(WeightFormula::InverseLogFrequency { c: 1.0 }
            .weights(&[1])
            .is_err());
    }

    #[test]
    fn from_data_is_computed_once_and_read_back_from_ron() {
        let mut weights: ClassWeights =
            ron::from_str("FromData(formula: InverseLogFrequency(c: 1.1))").expect("valid");
        assert!(weights.needs_data() && weights.values().is_none());
        weights.compute(&[3, 1]).expect("computed");
        let expected = [0.75f64, 0.25].map(|p| (1.0 / (1.1 + p).ln()) as f32);
        assert_eq!(weights.values(), Some(&expected[..]));
        assert!(!weights.needs_data());
        // The resolved experiment carries the numbers and reads back the same.
        let text = ron::to_string(&weights).expect("serialisable");
        assert!(text.contains("computed:Some"), "{text}");
        assert_eq!(
            ron::from_str::<ClassWeights>(&text).expect("round trip"),
            weights
        );
    }

    #[test]
    fn older_spellings_still_read() {
        let none: ClassWeights = ron::from_str("None").expect("valid");
        assert_eq!(none, ClassWeights::Uniform);
        let some: ClassWeights = ron::from_str("Some([1.0, 2.5])").expect("valid");
        assert_eq!(some, ClassWeights::Explicit(vec![1.0, 2.5]));
        let from_data: ClassWeights = ron::from_str("FromData()").expect("valid");
        assert_eq!(
            from_data,
            ClassWeights::FromData {
                formula: WeightFormula::default(),
                computed: None
            }
        );
    }
}

//! Learning-rate schedules, as pure functions of the optimizer step (so nothing but the step
//! needs saving for an exact resume).

use serde::{Deserialize, Serialize};

/// How the learning rate evolves over `total_steps` optimizer steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LrSchedule {
    /// `lr · (1 − t/T)^power`, after an optional linear warm-up from `warmup_factor · lr`.
    ///
    /// `official_offset` reproduces the official PIDNet loop, which sets the LR *after* each
    /// step: steps 0 and 1 both use the base LR and step k ≥ 1 uses t = k − 1.
    Poly {
        power: f64,
        #[serde(default)]
        warmup_steps: u64,
        #[serde(default = "default_warmup_factor")]
        warmup_factor: f64,
        #[serde(default = "default_true")]
        official_offset: bool,
    },
    /// Half-cosine from `lr` to `min_factor · lr`, after an optional linear warm-up.
    Cosine {
        #[serde(default)]
        warmup_steps: u64,
        #[serde(default = "default_warmup_factor")]
        warmup_factor: f64,
        /// Default 0.1, SAM 2.1's (the cosine recipe segburn ships), so that a partly written
        /// `Cosine(warmup_steps: 100)` keeps it.
        #[serde(default = "default_min_factor")]
        min_factor: f64,
    },
    Constant,
}

fn default_warmup_factor() -> f64 {
    0.1
}

fn default_min_factor() -> f64 {
    0.1
}

fn default_true() -> bool {
    true
}

impl Default for LrSchedule {
    /// The official PIDNet schedule: poly 0.9, no warm-up.
    fn default() -> Self {
        LrSchedule::Poly {
            power: 0.9,
            warmup_steps: 0,
            warmup_factor: 0.1,
            official_offset: true,
        }
    }
}

fn warmup(step: u64, steps: u64, factor: f64) -> Option<f64> {
    (step < steps).then(|| factor + (1.0 - factor) * step as f64 / steps as f64)
}

impl LrSchedule {
    /// The learning rate of optimizer step `step` (0-based) of `total_steps`.
    pub fn lr(&self, base_lr: f64, step: u64, total_steps: u64) -> f64 {
        let total = total_steps.max(1) as f64;
        match *self {
            LrSchedule::Poly {
                power,
                warmup_steps,
                warmup_factor,
                official_offset,
            } => {
                if let Some(f) = warmup(step, warmup_steps, warmup_factor) {
                    return base_lr * f;
                }
                let t = if official_offset {
                    step.saturating_sub(1)
                } else {
                    step
                };
                base_lr * (1.0 - (t as f64 / total).min(1.0)).powf(power)
            }
            LrSchedule::Cosine {
                warmup_steps,
                warmup_factor,
                min_factor,
            } => {
                if let Some(f) = warmup(step, warmup_steps, warmup_factor) {
                    return base_lr * f;
                }
                let span = (total - warmup_steps as f64).max(1.0);
                let progress = ((step - warmup_steps) as f64 / span).min(1.0);
                let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
                base_lr * (min_factor + (1.0 - min_factor) * cosine)
            }
            LrSchedule::Constant => base_lr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poly_matches_the_official_loop() {
        let s = LrSchedule::default();
        let n = 119_548;
        assert_eq!(s.lr(0.01, 0, n), 0.01);
        assert_eq!(s.lr(0.01, 1, n), 0.01);
        let k = 50_000;
        let expected = 0.01 * (1.0 - (k - 1) as f64 / n as f64).powf(0.9);
        assert!((s.lr(0.01, k, n) - expected).abs() < 1e-15);
        assert!(s.lr(0.01, n + 5, n) >= 0.0);
    }

    #[test]
    fn warmup_ramps_linearly_then_hands_over() {
        let s = LrSchedule::Poly {
            power: 1.0,
            warmup_steps: 10,
            warmup_factor: 0.1,
            official_offset: false,
        };
        assert!((s.lr(1.0, 0, 100) - 0.1).abs() < 1e-12);
        assert!((s.lr(1.0, 5, 100) - 0.55).abs() < 1e-12);
        assert!((s.lr(1.0, 10, 100) - 0.9).abs() < 1e-12);
    }

    #[test]
    fn cosine_ends_at_its_floor() {
        let s = LrSchedule::Cosine {
            warmup_steps: 0,
            warmup_factor: 0.1,
            min_factor: 0.1,
        };
        assert!((s.lr(1.0, 0, 100) - 1.0).abs() < 1e-12);
        assert!((s.lr(1.0, 50, 100) - 0.55).abs() < 1e-12);
        assert!((s.lr(1.0, 100, 100) - 0.1).abs() < 1e-12);
        assert_eq!(LrSchedule::Constant.lr(0.3, 7, 10), 0.3);
    }
}

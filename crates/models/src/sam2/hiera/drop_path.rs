//! Stochastic depth (`DropPath`) for training Hiera, as the official fine-tuning recipe uses it
//! (`reference/sam2-hiera-spec.md` §6): block `i` of a `d`-block trunk drops its attention
//! branch and, separately, its MLP branch for a whole sample with probability
//! `rate · i / (d − 1)` (`torch.linspace(0, rate, d)`), and scales kept branches by `1 / keep`.
//!
//! The draws are a pure function of `(seed, step, block, branch, sample)` rather than of the
//! backend's random state, so a resumed run drops exactly what the uninterrupted one did.

use burn::tensor::{backend::Backend, Tensor, TensorData};

/// The stochastic depth of one training step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropPath {
    /// Drop probability of the last block (the official fine-tune: 0.1).
    pub rate: f64,
    /// The run's seed.
    pub seed: u64,
    /// The optimizer step the draws belong to.
    pub step: u64,
    /// The micro-batch of the step (with gradient accumulation or data-parallel replicas):
    /// its samples draw apart from the other micro-batches'.
    pub micro_batch: u64,
}

/// Which residual branch of a block a draw is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Branch {
    /// `shortcut + attn(norm1(x))`.
    Attention = 0,
    /// `x + mlp(norm2(x))`.
    Mlp = 1,
}

/// SplitMix64's output function: a well-mixed 64-bit value of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl DropPath {
    /// The drop probability of block `block` of a `depth`-block trunk.
    pub fn block_rate(&self, block: usize, depth: usize) -> f64 {
        if depth <= 1 {
            return 0.0;
        }
        self.rate * block as f64 / (depth - 1) as f64
    }

    /// Whether `sample` keeps `branch` of `block` (probability `keep`).
    fn keeps(&self, block: usize, branch: Branch, sample: usize, keep: f64) -> bool {
        // Micro-batch 0 keeps the plain sample index, so one micro-batch per step draws as
        // before micro-batches existed.
        let sample = sample as u64 | (self.micro_batch << 32);
        let key = [self.step, block as u64, branch as u64, sample]
            .iter()
            .fold(mix(self.seed), |state, &part| mix(state ^ part));
        // The top 53 bits as a uniform number in [0, 1).
        let uniform = (key >> 11) as f64 / (1u64 << 53) as f64;
        uniform < keep
    }

    /// Per-sample factors of `branch` of `block`: 0 (dropped) or `1 / keep`; `None` when the
    /// block never drops.
    pub fn factors(
        &self,
        block: usize,
        depth: usize,
        branch: Branch,
        batch: usize,
    ) -> Option<Vec<f32>> {
        let rate = self.block_rate(block, depth);
        if rate <= 0.0 {
            return None;
        }
        let keep = 1.0 - rate;
        Some(
            (0..batch)
                .map(|sample| {
                    if self.keeps(block, branch, sample, keep) {
                        (1.0 / keep) as f32
                    } else {
                        0.0
                    }
                })
                .collect(),
        )
    }

    /// [`Self::factors`] as a `[N, 1, 1, 1]` tensor in `like`'s dtype and device, to multiply
    /// a BHWC branch output with.
    pub fn factor_tensor<B: Backend>(
        &self,
        block: usize,
        depth: usize,
        branch: Branch,
        like: &Tensor<B, 4>,
    ) -> Option<Tensor<B, 4>> {
        let batch = like.dims()[0];
        let factors = self.factors(block, depth, branch, batch)?;
        let tensor =
            Tensor::<B, 4>::from_data(TensorData::new(factors, [batch, 1, 1, 1]), &like.device());
        Some(tensor.cast(like.dtype()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_linspace_and_draws_are_reproducible() {
        let drop = DropPath {
            rate: 0.1,
            seed: 123,
            step: 7,
            micro_batch: 0,
        };
        assert_eq!(drop.block_rate(0, 12), 0.0);
        assert!((drop.block_rate(11, 12) - 0.1).abs() < 1e-15);
        assert!((drop.block_rate(5, 12) - 0.1 * 5.0 / 11.0).abs() < 1e-15);
        assert_eq!(drop.factors(0, 12, Branch::Mlp, 4), None);
        let a = drop
            .factors(11, 12, Branch::Attention, 4096)
            .expect("drops");
        assert_eq!(
            Some(a.clone()),
            drop.factors(11, 12, Branch::Attention, 4096)
        );
        // Branches and steps draw independently.
        assert_ne!(Some(a.clone()), drop.factors(11, 12, Branch::Mlp, 4096));
        let next = DropPath { step: 8, ..drop };
        assert_ne!(
            Some(a.clone()),
            next.factors(11, 12, Branch::Attention, 4096)
        );
        // So do the micro-batches of one step.
        let other = DropPath {
            micro_batch: 1,
            ..drop
        };
        assert_ne!(
            Some(a.clone()),
            other.factors(11, 12, Branch::Attention, 4096)
        );
        // Dropped samples are 0, kept ones 1/keep, about 10 % dropped.
        let keep = 1.0 / 0.9f32;
        assert!(a.iter().all(|&f| f == 0.0 || f == keep));
        let dropped = a.iter().filter(|&&f| f == 0.0).count() as f64 / a.len() as f64;
        assert!((dropped - 0.1).abs() < 0.02, "dropped {dropped}");
    }
}

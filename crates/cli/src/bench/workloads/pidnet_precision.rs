//! PIDNet training throughput in a given precision, the way the trainer runs it: the f32 input batch is
//! cast to the compute dtype (the model casts its f32 weights to the input's dtype), the loss
//! stack runs in f32 on host labels, the loss is scaled for f16 and the gradients unscaled
//! (`unscale_and_clip`), then an SGD step on the f32 master weights.

use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor, TensorData};
use segburn_models::pidnet::{official_key, PidNet, PidNetConfig, PidNetSize};
use segburn_train::loss::{
    ClassWeights, PidNetLoss, PidNetLossConfig, PixelTargets, CITYSCAPES_CLASS_WEIGHTS,
};
use segburn_train::mixed_precision::{LossScalerConfig, Precision};
use segburn_train::optim::{list_params, unscale_and_clip, SgdSettings};

use super::pidnet::synthetic_targets;
use super::timing::{measure, Timing};

/// How many runs to time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    pub warmups: usize,
    pub reps: usize,
}

/// One full training step at `[n, 3, h, w]` in `precision`, as the trainer does it.
pub fn pidnet_train_step_in<B: AutodiffBackend>(
    size: PidNetSize,
    [n, h, w]: [usize; 3],
    precision: Precision,
    device: &B::Device,
    repeats: Repeats,
) -> Timing {
    let mut model = Some(PidNetConfig::new(size, 19).init::<B>(device));
    let params = model
        .as_ref()
        .map(|m| list_params(m, &official_key))
        .unwrap_or_default();
    let mut optimizer = SgdSettings::default().burn_config().init::<B, PidNet<B>>();
    let loss = PidNetLoss::new(PidNetLossConfig {
        class_weights: ClassWeights::Explicit(CITYSCAPES_CLASS_WEIGHTS.to_vec()),
        ..PidNetLossConfig::default()
    })
    .expect("the official loss configuration is valid");
    let scale = if precision.uses_loss_scaling() {
        LossScalerConfig::default().initial_scale
    } else {
        1.0
    };
    let input = Tensor::<B, 4>::random([n, 3, h, w], Distribution::Default, device)
        .cast(precision.compute_dtype());
    let (labels, edges) = synthetic_targets(n, h, w, 19);
    let targets =
        PixelTargets::new(labels, [n, h, w], 19, 255).expect("synthetic labels are valid");
    let edges = Tensor::<B, 3>::from_data(TensorData::new(edges, [n, h, w]), device);
    measure(repeats.warmups, repeats.reps, || {
        let current = model.take().expect("model is put back after each step");
        let out = current
            .forward(input.clone())
            .expect("bench input is a multiple of 8");
        let terms = loss
            .forward_targets(out.p_aux, out.main, out.boundary, &targets, edges.clone())
            .expect("synthetic targets are valid");
        let mut grads = GradientsParams::from_grads((terms.total * scale).backward(), &current);
        let summary = unscale_and_clip::<B::InnerBackend>(&mut grads, &params, scale, None, device);
        let next = if summary.finite {
            optimizer.step(0.01, current, grads)
        } else {
            current
        };
        let _ = B::sync(device);
        model = Some(next);
    })
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};

    use super::*;

    #[test]
    fn every_precision_runs_once_at_a_tiny_size() {
        let device = Default::default();
        let once = Repeats {
            warmups: 0,
            reps: 1,
        };
        for precision in [Precision::F32, Precision::Bf16, Precision::F16] {
            let train = pidnet_train_step_in::<Autodiff<Flex>>(
                PidNetSize::S,
                [1, 32, 32],
                precision,
                &device,
                once,
            );
            assert!(train.median_ms > 0.0);
        }
    }
}

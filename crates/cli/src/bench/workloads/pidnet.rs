//! PIDNet workloads: the eval forward pass and one full training step (official loss stack,
//! backward, SGD), the same workloads as the PyTorch CPU anchors in the PIDNet spec.

use burn::module::AutodiffModule;
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use segburn_models::pidnet::{PidNetConfig, PidNetSize};
use segburn_train::loss::{ClassWeights, PidNetLoss, PidNetLossConfig, CITYSCAPES_CLASS_WEIGHTS};
use segburn_train::optim::SgdSettings;

use super::timing::{measure, Timing};

/// Deterministic labels (class blocks with ~10% ignore pixels) and their boundary map.
pub fn synthetic_targets(n: usize, h: usize, w: usize, classes: usize) -> (Vec<i64>, Vec<f32>) {
    let mut labels = Vec::with_capacity(n * h * w);
    for b in 0..n {
        for y in 0..h {
            for x in 0..w {
                let block = (b * 7 + (y / 16) * 5 + (x / 16) * 3) % (classes + 1);
                labels.push(if block == classes { 255 } else { block as i64 });
            }
        }
    }
    let mut edges = vec![0f32; n * h * w];
    for b in 0..n {
        for y in 0..h.saturating_sub(1) {
            for x in 0..w.saturating_sub(1) {
                let i = b * h * w + y * w + x;
                if labels[i] != labels[i + 1] || labels[i] != labels[i + w] {
                    edges[i] = 1.0;
                }
            }
        }
    }
    (labels, edges)
}

/// Eval-mode forward of the inference graph on `[1, 3, h, w]`.
pub fn pidnet_eval_forward<B: Backend>(
    size: PidNetSize,
    [h, w]: [usize; 2],
    device: &B::Device,
    warmups: usize,
    reps: usize,
) -> Timing {
    let model = PidNetConfig::new(size, 19)
        .with_augment(false)
        .init::<B>(device);
    let input = Tensor::<B, 4>::random([1, 3, h, w], burn::tensor::Distribution::Default, device);
    measure(warmups, reps, || {
        let out = model
            .infer(input.clone())
            .expect("bench input is a multiple of 8");
        // Reading one value forces the computation on lazy/asynchronous backends.
        let _ = out.slice([0..1, 0..1, 0..1, 0..1]).into_data();
    })
}

/// One training step at `[n, 3, h, w]`: forward, the official loss stack (OHEM, boundary BCE,
/// BAS), backward and an SGD step.
pub fn pidnet_train_step<B: AutodiffBackend>(
    size: PidNetSize,
    [n, h, w]: [usize; 3],
    device: &B::Device,
    warmups: usize,
    reps: usize,
) -> Timing {
    let mut model = Some(PidNetConfig::new(size, 19).init::<B>(device));
    let mut optimizer = SgdSettings::default()
        .burn_config()
        .init::<B, segburn_models::pidnet::PidNet<B>>();
    let config = PidNetLossConfig {
        class_weights: ClassWeights::Explicit(CITYSCAPES_CLASS_WEIGHTS.to_vec()),
        ..PidNetLossConfig::default()
    };
    let loss = PidNetLoss::new(config).expect("the official loss configuration is valid");
    let input = Tensor::<B, 4>::random([n, 3, h, w], burn::tensor::Distribution::Default, device);
    let (labels, edges) = synthetic_targets(n, h, w, 19);
    let labels = Tensor::<B, 3, Int>::from_data(TensorData::new(labels, [n, h, w]), device);
    let edges = Tensor::<B, 3>::from_data(TensorData::new(edges, [n, h, w]), device);
    measure(warmups, reps, || {
        let current = model.take().expect("model is put back after each step");
        let out = current
            .forward(input.clone())
            .expect("bench input is a multiple of 8");
        let terms = loss
            .forward(
                out.p_aux,
                out.main,
                out.boundary,
                labels.clone(),
                edges.clone(),
            )
            .expect("synthetic targets are valid");
        let grads = GradientsParams::from_grads(terms.total.backward(), &current);
        let next = optimizer.step(0.01, current, grads);
        let _ = next.valid();
        model = Some(next);
    })
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use segburn_models::pidnet::PidNetSize;

    use super::*;

    #[test]
    fn smoke_eval_and_train_step_run_once() {
        let device = Default::default();
        let eval = pidnet_eval_forward::<Flex>(PidNetSize::S, [64, 64], &device, 0, 1);
        assert_eq!(eval.runs_ms.len(), 1);
        assert!(eval.median_ms > 0.0);
        let train = pidnet_train_step::<Autodiff<Flex>>(PidNetSize::S, [2, 64, 64], &device, 0, 1);
        assert!(train.median_ms > 0.0);
    }

    #[test]
    fn synthetic_targets_have_ignore_pixels_and_edges() {
        let (labels, edges) = synthetic_targets(1, 128, 128, 19);
        assert!(labels.contains(&255));
        assert!(labels.iter().all(|&l| l == 255 || (0..19).contains(&l)));
        assert!(edges.contains(&1.0));
    }
}

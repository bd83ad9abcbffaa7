//! SGD as PyTorch defines it: `d = g + wd·p; v = μ·v + d` (no dampening; the first step sets
//! `v = d`); `p -= lr · (nesterov ? d + μ·v : v)`.
//!
//! Burn's `MomentumConfig` defaults to dampening 0.1, which silently shrinks every update after
//! the first by 10% compared with the official PIDNet recipe; this type always passes 0.

use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::SgdConfig;
use serde::{Deserialize, Serialize};

/// SGD hyper-parameters (the official PIDNet Cityscapes recipe by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SgdSettings {
    pub momentum: f64,
    /// Coupled (L2) weight decay, added to the gradient as PyTorch's SGD does.
    pub weight_decay: f64,
    pub nesterov: bool,
}

impl Default for SgdSettings {
    fn default() -> Self {
        Self {
            momentum: 0.9,
            weight_decay: 5e-4,
            nesterov: false,
        }
    }
}

impl SgdSettings {
    /// The Burn configuration with PyTorch's semantics.
    pub fn burn_config(&self) -> SgdConfig {
        let momentum = (self.momentum > 0.0).then(|| {
            MomentumConfig::new()
                .with_momentum(self.momentum)
                .with_dampening(0.0)
                .with_nesterov(self.nesterov)
        });
        let weight_decay =
            (self.weight_decay > 0.0).then(|| WeightDecayConfig::new(self.weight_decay as f32));
        SgdConfig::new()
            .with_momentum(momentum)
            .with_weight_decay(weight_decay)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use burn::backend::{Autodiff, Flex};
    use burn::module::{Module, ModuleVisitor, Param};
    use burn::optim::{GradientsParams, Optimizer};
    use burn::tensor::backend::AutodiffBackend;
    use burn::tensor::{Tensor, TensorData};
    use segburn_models::fixtures::{fixture_path, max_abs_diff, Fixture};
    use segburn_models::pidnet::{
        load_pidnet, official_key, pidnet_state_dict, LoadMode, PidNetConfig, PidNetSize,
    };
    use segburn_models::weights::ParamPath;

    use super::SgdSettings;

    type AD = Autodiff<Flex>;

    /// Registers given gradients (by official key) for the matching parameters.
    struct InjectGradients<'a> {
        path: ParamPath,
        by_key: &'a BTreeMap<String, TensorData>,
        grads: GradientsParams,
    }

    impl<B: AutodiffBackend> ModuleVisitor<B> for InjectGradients<'_> {
        fn enter_module(&mut self, name: &str, container_type: &str) {
            self.path.enter(name, container_type);
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.exit();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(data) = self.by_key.get(&official_key(self.path.segments())) {
                let grad =
                    Tensor::<B::InnerBackend, D>::from_data(data.clone(), &param.lazy_device());
                self.grads.register(param.id, grad);
            }
        }
    }

    /// The flattened indices at which `step` stores `key` (`sample_index.<key>`), if sampled.
    fn sample_index(step: &Fixture, key: &str) -> Option<Vec<usize>> {
        let index = step.tensors().get(&format!("sample_index.{key}"))?;
        Some(index.iter::<i64>().map(|i| i as usize).collect())
    }

    /// One step from PyTorch's gradients (the f32 rounding of its f64 ones, which PyTorch's
    /// SGD was given too) must land on PyTorch's parameters. A gradient stored as a strided
    /// sample is given as that sample with zeros elsewhere; the update is element-wise, so the
    /// sampled entries are compared.
    #[test]
    fn one_step_matches_pytorch_sgd_without_dampening() {
        let weights = fixture_path("pidnet_s/state_dict.safetensors").unwrap();
        let model = PidNetConfig::new(PidNetSize::S, 19).init::<AD>(&Default::default());
        let (model, _) = load_pidnet(model, &weights, LoadMode::Strict).unwrap();
        let before = pidnet_state_dict(&model);
        let step = Fixture::load("pidnet_s/train/step.safetensors").unwrap();
        let by_key: BTreeMap<String, TensorData> = step
            .tensors()
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("grad64.").map(|k| (k.to_string(), v)))
            .map(|(key, stored)| {
                let values: Vec<f32> = stored.iter::<f64>().map(|g| g as f32).collect();
                let shape = before[&key].shape.to_vec();
                let grad = match sample_index(&step, &key) {
                    Some(index) => {
                        let mut whole = vec![0.0f32; shape.iter().product()];
                        index.iter().zip(values).for_each(|(&i, g)| whole[i] = g);
                        whole
                    }
                    None => values,
                };
                (key, TensorData::new(grad, shape))
            })
            .collect();
        assert_eq!(by_key.len(), 23);
        let mut inject = InjectGradients {
            path: ParamPath::new(),
            by_key: &by_key,
            grads: GradientsParams::new(),
        };
        model.visit(&mut inject);

        let mut optimizer = SgdSettings::default().burn_config().init::<AD, _>();
        let model = optimizer.step(0.01, model, inject.grads);
        let after = pidnet_state_dict(&model);
        let mut worst = 0.0f64;
        for key in by_key.keys() {
            let whole: Vec<f64> = after[key].iter::<f64>().collect();
            let ours = match sample_index(&step, key) {
                Some(index) => index.iter().map(|&i| whole[i]).collect(),
                None => whole,
            };
            let expected = step.values_f64(&format!("sgd_after.{key}")).unwrap();
            let err = max_abs_diff(&ours, &expected);
            assert!(err <= 1e-6, "{key} after one SGD step differs by {err:e}");
            worst = worst.max(err);
        }
        println!("one SGD step: worst max abs {worst:e}");
    }

    #[derive(Module, Debug)]
    struct Scalar<B: burn::tensor::backend::Backend> {
        value: Param<Tensor<B, 1>>,
    }

    /// The second step is where dampening shows: v₂ = μ·v₁ + d₂ (Burn's default would scale d₂
    /// by 0.9). Checked against the closed form with a constant gradient.
    #[test]
    fn second_step_has_no_dampening() {
        let device = Default::default();
        let (p0, g, lr, mu, wd) = (1.0f64, 0.5f64, 0.1f64, 0.9f64, 0.01f64);
        let mut model = Scalar::<AD> {
            value: Param::from_tensor(Tensor::from_floats([p0 as f32], &device)),
        };
        let settings = SgdSettings {
            momentum: mu,
            weight_decay: wd,
            nesterov: false,
        };
        let mut optimizer = settings.burn_config().init::<AD, Scalar<AD>>();
        for _ in 0..2 {
            let mut grads = GradientsParams::new();
            grads.register(
                model.value.id,
                Tensor::<Flex, 1>::from_floats([g as f32], &device),
            );
            model = optimizer.step(lr, model, grads);
        }
        let v1 = g + wd * p0;
        let p1 = p0 - lr * v1;
        let v2 = mu * v1 + (g + wd * p1);
        let p2 = p1 - lr * v2;
        let ours = model.value.val().into_data().to_vec::<f32>().unwrap()[0] as f64;
        assert!((ours - p2).abs() < 1e-6, "p2 = {ours}, PyTorch gives {p2}");
    }
}

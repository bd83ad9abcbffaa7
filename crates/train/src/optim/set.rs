//! The optimizer of a run: SGD or AdamW, split into parameter groups that each have their own
//! learning-rate multiplier and weight decay (e.g. no decay on norms and biases).

use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{AdamW, AdamWConfig, GradientsParams, Optimizer, Sgd};
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use super::gradients::move_gradient;
use super::named_state::{export_state, import_state};
use super::params::ParamInfo;
use super::SgdSettings;
use segburn_models::tensor_file::NamedTensors;

/// AdamW hyper-parameters: PyTorch's betas and epsilon (Burn's epsilon default differs) and
/// SAM 2.1's weight decay 0.1 (PyTorch's default is 0.01). SAM 2.1 is the AdamW recipe segburn
/// ships; keeping its value here means `optimizer: AdamW((beta2: 0.99))` in a SAM2 experiment
/// keeps the recipe's decay instead of silently taking another default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWSettings {
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
}

impl Default for AdamWSettings {
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.1,
        }
    }
}

/// Which optimizer, with its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OptimizerConfig {
    Sgd(SgdSettings),
    AdamW(AdamWSettings),
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        OptimizerConfig::Sgd(SgdSettings::default())
    }
}

/// Which parameters a group takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ParamSelector {
    /// Normalisation weights and biases, and every bias.
    NormsAndBiases,
    /// Parameters whose official key starts with one of these.
    KeyPrefixes(Vec<String>),
}

/// A parameter group; parameters no group selects form the default group (multiplier 1, the
/// optimizer's own weight decay). The first matching group wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamGroupConfig {
    pub select: ParamSelector,
    #[serde(default = "one")]
    pub lr_mult: f64,
    /// Overrides the optimizer's weight decay (e.g. `Some(0.0)`).
    #[serde(default)]
    pub weight_decay: Option<f64>,
}

fn one() -> f64 {
    1.0
}

impl ParamSelector {
    fn selects(&self, param: &ParamInfo) -> bool {
        match self {
            ParamSelector::NormsAndBiases => param.is_norm || param.is_bias,
            ParamSelector::KeyPrefixes(prefixes) => {
                prefixes.iter().any(|p| param.key.starts_with(p.as_str()))
            }
        }
    }
}

enum GroupOptimizer<M: AutodiffModule<B>, B: AutodiffBackend> {
    Sgd(OptimizerAdaptor<Sgd<B::InnerBackend>, M, B>),
    AdamW(OptimizerAdaptor<AdamW, M, B>),
}

struct Group<M: AutodiffModule<B>, B: AutodiffBackend> {
    optimizer: GroupOptimizer<M, B>,
    lr_mult: f64,
    params: Vec<ParamInfo>,
}

/// The optimizers of all parameter groups of one model.
pub struct OptimizerSet<M: AutodiffModule<B>, B: AutodiffBackend> {
    groups: Vec<Group<M, B>>,
}

fn build<M: AutodiffModule<B>, B: AutodiffBackend>(
    config: &OptimizerConfig,
    weight_decay: Option<f64>,
) -> GroupOptimizer<M, B> {
    match config {
        OptimizerConfig::Sgd(settings) => {
            let mut settings = settings.clone();
            if let Some(wd) = weight_decay {
                settings.weight_decay = wd;
            }
            GroupOptimizer::Sgd(settings.burn_config().init::<B, M>())
        }
        OptimizerConfig::AdamW(settings) => {
            let config = AdamWConfig::new()
                .with_beta_1(settings.beta1 as f32)
                .with_beta_2(settings.beta2 as f32)
                .with_epsilon(settings.epsilon as f32)
                .with_weight_decay(weight_decay.unwrap_or(settings.weight_decay) as f32);
            GroupOptimizer::AdamW(config.init::<B, M>())
        }
    }
}

impl<M: AutodiffModule<B>, B: AutodiffBackend> OptimizerSet<M, B> {
    /// Splits `params` into the configured groups (plus the default group).
    pub fn new(
        config: &OptimizerConfig,
        groups: &[ParamGroupConfig],
        params: &[ParamInfo],
    ) -> Self {
        Self::with_lr_scales(config, groups, params, &|_| 1.0)
    }

    /// [`Self::new`], with every parameter's learning rate also multiplied by
    /// `lr_scale(param)` (e.g. layer-wise decay over a backbone's blocks): each configured
    /// group is split by scale, one optimizer per part, so adaptive optimizers (AdamW) see the
    /// scaled learning rate itself, as PyTorch's per-parameter-group `lr` does. The state is
    /// still saved per parameter, so checkpoints do not depend on the split.
    pub fn with_lr_scales(
        config: &OptimizerConfig,
        groups: &[ParamGroupConfig],
        params: &[ParamInfo],
        lr_scale: &dyn Fn(&ParamInfo) -> f64,
    ) -> Self {
        // (configured group, scale) -> members.
        let mut parts: Vec<(usize, f64, Vec<ParamInfo>)> = Vec::new();
        for param in params {
            let index = groups
                .iter()
                .position(|g| g.select.selects(param))
                .unwrap_or(groups.len());
            let scale = lr_scale(param);
            match parts
                .iter_mut()
                .find(|(i, s, _)| *i == index && s.to_bits() == scale.to_bits())
            {
                Some((_, _, members)) => members.push(param.clone()),
                None => parts.push((index, scale, vec![param.clone()])),
            }
        }
        // Configured groups first, the default group last (stable: scales in order).
        parts.sort_by_key(|(index, _, _)| *index);
        let groups = parts
            .into_iter()
            .map(|(index, scale, params)| {
                let (lr_mult, weight_decay) = groups
                    .get(index)
                    .map_or((1.0, None), |g| (g.lr_mult, g.weight_decay));
                Group {
                    optimizer: build(config, weight_decay),
                    lr_mult: lr_mult * scale,
                    params,
                }
            })
            .collect();
        Self { groups }
    }

    /// Number of parameters in each group (default group last).
    pub fn group_sizes(&self) -> Vec<usize> {
        self.groups.iter().map(|g| g.params.len()).collect()
    }

    /// One optimizer step of every group at `lr` × its multiplier.
    pub fn step(&mut self, lr: f64, mut model: M, mut grads: GradientsParams) -> M {
        for group in &mut self.groups {
            let mut own = GradientsParams::new();
            for param in &group.params {
                move_gradient::<B::InnerBackend>(&mut grads, &mut own, param);
            }
            let lr = lr * group.lr_mult;
            model = match &mut group.optimizer {
                GroupOptimizer::Sgd(o) => o.step(lr, model, own),
                GroupOptimizer::AdamW(o) => o.step(lr, model, own),
            };
        }
        model
    }

    /// The state of every group as `optim.<key>.<buffer>` tensors.
    pub fn export(&self, device: &B::Device) -> NamedTensors {
        let mut out = NamedTensors::new();
        for group in &self.groups {
            match &group.optimizer {
                GroupOptimizer::Sgd(o) => export_state(o, &group.params, device, &mut out),
                GroupOptimizer::AdamW(o) => export_state(o, &group.params, device, &mut out),
            }
        }
        out
    }

    /// Restores the state saved by [`Self::export`].
    pub fn import(mut self, tensors: &NamedTensors, device: &B::Device) -> Self {
        for group in &mut self.groups {
            group.optimizer = match std::mem::replace(&mut group.optimizer, placeholder()) {
                GroupOptimizer::Sgd(o) => {
                    GroupOptimizer::Sgd(import_state(o, &group.params, tensors, device))
                }
                GroupOptimizer::AdamW(o) => {
                    GroupOptimizer::AdamW(import_state(o, &group.params, tensors, device))
                }
            };
        }
        self
    }
}

/// A throwaway value for `mem::replace` while a group's optimizer is rebuilt.
fn placeholder<M: AutodiffModule<B>, B: AutodiffBackend>() -> GroupOptimizer<M, B> {
    GroupOptimizer::Sgd(SgdSettings::default().burn_config().init::<B, M>())
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::module::{Module, Param};
    use burn::tensor::Tensor;
    use segburn_models::nn::{BatchNorm2d, BatchNorm2dConfig};
    use segburn_models::weights::dotted_path;

    use super::*;
    use crate::compute_threads::on_compute_pool;
    use crate::optim::list_params;

    type AD = Autodiff<Flex>;

    #[derive(Module, Debug)]
    struct Small<B: burn::tensor::backend::Backend> {
        weight: Param<Tensor<B, 2>>,
        bias: Param<Tensor<B, 1>>,
        bn: BatchNorm2d<B>,
    }

    fn small() -> Small<AD> {
        let device = Default::default();
        Small {
            weight: Param::from_tensor(Tensor::from_floats([[1.0, -2.0], [0.5, 3.0]], &device)),
            bias: Param::from_tensor(Tensor::from_floats([0.1, 0.2], &device)),
            bn: BatchNorm2dConfig::new(2).init(&device),
        }
    }

    fn loss(m: &Small<AD>) -> Tensor<AD, 1> {
        let x = Tensor::<AD, 4>::from_floats(
            [[[[1.0, 2.0]], [[3.0, -1.0]]], [[[0.5, 0.0]], [[1.0, 2.0]]]],
            &Default::default(),
        );
        let y = m.bn.forward(x);
        (m.weight.val().sum() + m.bias.val().sum()).reshape([1]) * y.square().mean()
    }

    fn grads(m: &Small<AD>) -> GradientsParams {
        GradientsParams::from_grads(on_compute_pool(|| loss(m).backward()), m)
    }

    #[test]
    fn groups_split_norms_and_biases_from_the_rest() {
        let model = small();
        let params = list_params(&model, &dotted_path);
        let groups = [ParamGroupConfig {
            select: ParamSelector::NormsAndBiases,
            lr_mult: 1.0,
            weight_decay: Some(0.0),
        }];
        let set = OptimizerSet::<Small<AD>, AD>::new(&OptimizerConfig::default(), &groups, &params);
        // bias, bn.weight, bn.bias in the no-decay group; weight in the default group.
        assert_eq!(set.group_sizes(), [3, 1]);
    }

    #[test]
    fn adamw_state_survives_export_and_import_exactly() {
        let config = OptimizerConfig::AdamW(AdamWSettings::default());
        let model = small();
        let params = list_params(&model, &dotted_path);
        let mut set = OptimizerSet::<Small<AD>, AD>::new(&config, &[], &params);
        let mut model = model;
        for _ in 0..2 {
            let g = grads(&model);
            model = set.step(1e-2, model, g);
        }
        let saved = set.export(&Default::default());
        assert_eq!(
            saved.len(),
            3 * 4,
            "exp_avg, exp_avg_sq and step for 4 parameters"
        );
        assert_eq!(saved["optim.weight.step"].iter::<i64>().next(), Some(2));

        let restored = OptimizerSet::<Small<AD>, AD>::new(&config, &[], &params)
            .import(&saved, &Default::default());
        let mut a = set;
        let mut b = restored;
        let g = grads(&model);
        let next_a = a.step(1e-2, model.clone(), g);
        let g = grads(&model);
        let next_b = b.step(1e-2, model, g);
        let wa: Vec<f32> = next_a.weight.val().into_data().to_vec().unwrap();
        let wb: Vec<f32> = next_b.weight.val().into_data().to_vec().unwrap();
        assert_eq!(wa, wb, "a restored AdamW takes the same step");
    }
}

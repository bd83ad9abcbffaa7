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

/// AdamW hyper-parameters (PyTorch's defaults; Burn's epsilon default differs).
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
            weight_decay: 0.01,
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
        let mut members: Vec<Vec<ParamInfo>> = vec![Vec::new(); groups.len() + 1];
        for param in params {
            let index = groups
                .iter()
                .position(|g| g.select.selects(param))
                .unwrap_or(groups.len());
            members[index].push(param.clone());
        }
        let mut built: Vec<Group<M, B>> = groups
            .iter()
            .zip(members.iter())
            .map(|(g, params)| Group {
                optimizer: build(config, g.weight_decay),
                lr_mult: g.lr_mult,
                params: params.clone(),
            })
            .collect();
        built.push(Group {
            optimizer: build(config, None),
            lr_mult: 1.0,
            params: members.pop().unwrap_or_default(),
        });
        built.retain(|g| !g.params.is_empty());
        Self { groups: built }
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

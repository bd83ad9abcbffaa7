//! The PIDNet task: its data (the threaded loader), model, optimizer and weights, as the
//! engine asks for them.

use std::path::Path;

use burn::tensor::backend::AutodiffBackend;
use segburn_data::{Batch, DataConfig, DataError, DatasetIndex, EpochIter, Loader, Mode};
use segburn_models::pidnet::{
    load_pidnet, load_pidnet_tensors, official_key, pidnet_state_dict, LoadMode, PidNet,
    PidNetConfig,
};
use segburn_models::tensor_file::NamedTensors;
use segburn_models::weights::LoadReport;

use super::recipe::{resolve_class_weights, PidNetRecipe};
use super::setup::PidNetSetup;
use super::step::PidNetStep;
use crate::checkpoint::load_checkpoint;
use crate::engine::{Task, TrainError};
use crate::loss::PidNetLoss;
use crate::metric::MetricReport;
use crate::optim::{list_params, OptimizerConfig, OptimizerSet, ParamGroupConfig, ParamInfo};

/// A PIDNet training task.
pub struct PidNetTask {
    pub(super) model: PidNetConfig,
    pub(super) data: DataConfig,
    pub(super) optimizer: OptimizerConfig,
    pub(super) param_groups: Vec<ParamGroupConfig>,
    pub(super) precision: crate::mixed_precision::Precision,
    step: PidNetStep,
    train_loader: Loader,
    pub(super) val_loader: Option<Loader>,
    pub(super) class_names: Vec<String>,
}

/// An epoch of training batches with the engine's error type.
pub type PidNetEpoch =
    std::iter::Map<EpochIter, fn(Result<Batch, DataError>) -> Result<Batch, TrainError>>;

impl PidNetTask {
    /// Checks the set-up ([`PidNetSetup::check`]), indexes the data and opens the loaders.
    /// `num_classes` is checked against the dataset here, and the data's `ignore_index` is the
    /// one the loss and the metrics use.
    pub fn new(setup: &PidNetSetup) -> Result<Self, TrainError> {
        setup.check()?;
        let data = &setup.data;
        let mut loss = setup.loss.clone();
        loss.ignore_index = i64::from(data.ignore_index);
        // Normally done by the caller already, so that the recorded experiment has them.
        resolve_class_weights(&mut loss, data)?;
        let train_index = DatasetIndex::new(&data.layout, &data.train_split, data.ignore_index)?;
        let class_names = train_index.label_map().classes().to_vec();
        if class_names.len() != setup.model.num_classes {
            return Err(TrainError::Config(format!(
                "model.num_classes is {} but the dataset has {} classes ({})",
                setup.model.num_classes,
                class_names.len(),
                train_index.label_map().description()
            )));
        }
        let seed = setup.train.seed;
        let train_loader = Loader::new(train_index, data, Mode::Train, seed)?;
        let val_loader = if setup.train.validates() {
            let index = DatasetIndex::new(&data.layout, &data.val_split, data.ignore_index)?;
            Some(Loader::new(index, data, Mode::Validation, seed)?)
        } else {
            None
        };
        Ok(Self {
            model: setup.model.clone(),
            data: data.clone(),
            optimizer: setup.train.optimizer.clone(),
            param_groups: setup.train.param_groups.clone(),
            precision: setup.train.precision,
            step: PidNetStep {
                loss: PidNetLoss::new(loss.clone())?,
                num_classes: setup.model.num_classes,
                ignore_index: loss.ignore_index,
            },
            train_loader,
            val_loader,
            class_names,
        })
    }

    /// The classes of the dataset, in label order.
    pub fn class_names(&self) -> &[String] {
        &self.class_names
    }
}

fn data_error(batch: Result<Batch, DataError>) -> Result<Batch, TrainError> {
    batch.map_err(TrainError::from)
}

impl<B: AutodiffBackend> Task<B> for PidNetTask {
    type Recipe = PidNetRecipe;
    type Step = PidNetStep;
    type Epoch = PidNetEpoch;
    type Validation = MetricReport;

    fn describe(&self) -> String {
        format!(
            "PIDNet-{:?} ({} classes, micro-batches of {})",
            self.model.size, self.model.num_classes, self.data.train_loader.batch_size
        )
    }

    fn batch_size_field(&self) -> (&'static str, usize) {
        (
            "data.train_loader.batch_size",
            self.data.train_loader.batch_size,
        )
    }

    fn init_model(&self, device: &B::Device) -> PidNet<B> {
        self.model.init::<B>(device)
    }

    fn trained_params(&self, model: &PidNet<B>) -> Vec<ParamInfo> {
        list_params(model, &official_key)
    }

    fn optimizer(&self, params: &[ParamInfo]) -> Result<OptimizerSet<PidNet<B>, B>, TrainError> {
        Ok(OptimizerSet::new(
            &self.optimizer,
            &self.param_groups,
            params,
        ))
    }

    fn export_model(&self, model: &PidNet<B>) -> NamedTensors {
        pidnet_state_dict(model)
    }

    fn load_exact(
        &self,
        model: PidNet<B>,
        tensors: &NamedTensors,
        source: &Path,
    ) -> Result<PidNet<B>, TrainError> {
        let (model, _) = load_pidnet_tensors(model, tensors, source, LoadMode::Strict)?;
        Ok(model)
    }

    /// An official `.pt`, an ImageNet backbone, or a segburn checkpoint's model: loads what
    /// matches and reports the rest.
    fn load_initial(
        &self,
        model: PidNet<B>,
        path: &Path,
    ) -> Result<(PidNet<B>, LoadReport), TrainError> {
        let loaded = match load_checkpoint(path) {
            Ok(checkpoint) => {
                load_pidnet_tensors(model, &checkpoint.model, path, LoadMode::Partial)
            }
            Err(_) => load_pidnet(model, path, LoadMode::Partial),
        };
        Ok(loaded?)
    }

    fn step(&self) -> PidNetStep {
        self.step.clone()
    }

    fn batches_per_epoch(&self) -> usize {
        self.train_loader.batches_per_epoch()
    }

    fn epoch(&self, epoch: u64, from: usize) -> PidNetEpoch {
        self.train_loader
            .epoch_iter(epoch, from)
            .map(data_error as fn(_) -> _)
    }

    fn can_validate(&self) -> bool {
        self.val_loader.is_some()
    }

    fn validate(&self, model: &PidNet<B>, device: &B::Device) -> Result<MetricReport, TrainError> {
        self.evaluate(model, device)
    }

    fn resume_breaking_fields(&self) -> &'static [&'static str] {
        &["model.", "data.ignore_index"]
    }
}

//! The experiment file: one RON file = one run. The root only composes each layer's own
//! configuration (model, data, loss, train) and picks the device.

use segburn_data::DataConfig;
use segburn_models::pidnet::{PidNetConfig, PidNetSize};
use segburn_train::loss::PidNetLossConfig;
use segburn_train::pidnet::{PidNetSetup, PidNetTrainConfig};
use serde::{Deserialize, Serialize};

use crate::device::DeviceConfig;
use crate::experiment::config_error::ConfigError;
use crate::experiment::file::{absolute, ExperimentFile};

/// The network to train.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub size: PidNetSize,
    pub num_classes: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            size: PidNetSize::S,
            num_classes: 19,
        }
    }
}

impl ModelConfig {
    /// The training graph (with the auxiliary heads).
    pub fn pidnet(&self) -> PidNetConfig {
        PidNetConfig::new(self.size, self.num_classes)
    }
}

/// The root of an experiment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct PidNetExperiment {
    pub model: ModelConfig,
    pub data: DataConfig,
    pub loss: PidNetLossConfig,
    pub train: PidNetTrainConfig,
    pub device: DeviceConfig,
}

impl PidNetExperiment {
    /// What the trainer needs.
    pub fn setup(&self) -> PidNetSetup {
        PidNetSetup {
            model: self.model.pidnet(),
            data: self.data.clone(),
            loss: self.loss.clone(),
            train: self.train.clone(),
            experiment_text: self.to_ron(),
        }
    }
}

impl ExperimentFile for PidNetExperiment {
    fn resolve_paths(&mut self) {
        for path in self.data.layout.paths_mut() {
            *path = absolute(path);
        }
        self.train.run_dir = absolute(&self.train.run_dir);
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.device.count() == 0 {
            return Err(ConfigError::Invalid(
                "device: give at least one device".into(),
            ));
        }
        self.setup()
            .check()
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Every PIDNet experiment shipped in configs/ parses and passes the checks.
    #[test]
    fn shipped_configs_load() {
        let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut loaded = 0;
        for entry in std::fs::read_dir(&configs).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("pidnet") || name == "quickstart.ron" {
                let experiment =
                    PidNetExperiment::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
                assert!(experiment.train.lr > 0.0);
                loaded += 1;
            }
        }
        assert_eq!(loaded, 7);
        let ade = PidNetExperiment::load(&configs.join("pidnet_s_ade20k.ron"), &[]).unwrap();
        assert!(matches!(
            ade.data.layout,
            segburn_data::Layout::Ade20k { .. }
        ));
        assert_eq!(ade.data.train_split, "training");
        assert_eq!(ade.data.train_loader.batch_size * ade.train.grad_accum, 16);
        let voc = PidNetExperiment::load(&configs.join("pidnet_s_voc.ron"), &[]).unwrap();
        assert_eq!(voc.model.num_classes, 21);
        assert_eq!(voc.data.train_split, "train+aug");
        let s = PidNetExperiment::load(&configs.join("pidnet_s.ron"), &[]).unwrap();
        assert_eq!(s.train.epochs, 484);
        assert_eq!(s.train.seed, 304);
        assert_eq!(s.loss.class_weights.values().map(<[f32]>::len), Some(19));
        assert_eq!(s.data.train_loader.batch_size * s.train.grad_accum, 12);
    }

    /// A partly written section (`val_loader: (batch_size: 1)`) takes the experiment's
    /// defaults for the fields it leaves out, in every section.
    #[test]
    fn partial_sections_take_the_experiment_defaults() {
        let foreign = crate::experiment::file::sections_with_foreign_defaults::<PidNetExperiment>();
        assert!(foreign.is_empty(), "sections: {foreign:?}");
    }

    /// `--print-config` output is itself a valid experiment that reads back the same.
    #[test]
    fn printed_config_round_trips() {
        let experiment = PidNetExperiment::default();
        let text = experiment.to_ron();
        let back: PidNetExperiment = ron::de::from_str(&text).unwrap();
        assert_eq!(back, experiment);
    }
}

//! The SAM2 experiment file: one RON file = one promptable-segmentation run. Like
//! [`crate::experiment::pidnet::PidNetExperiment`], the root only composes each layer's configuration
//! (model, data, loss, prompts, train) and picks the device.

use std::path::PathBuf;

use segburn_data::objects::{ObjectDataConfig, ObjectSource};
use segburn_train::loss::sam::SamLossConfig;
use segburn_train::sam2::{PromptConfig, Sam2ModelConfig, Sam2Setup, Sam2TrainConfig};
use segburn_train::TrainError;
use serde::{Deserialize, Serialize};

use crate::device::DeviceConfig;
use crate::experiment::config_error::ConfigError;
use crate::experiment::file::{absolute, ExperimentFile};

/// The root of a SAM2 experiment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Sam2Experiment {
    pub model: Sam2ModelConfig,
    pub data: ObjectDataConfig,
    pub loss: SamLossConfig,
    pub prompts: PromptConfig,
    pub train: Sam2TrainConfig,
    pub device: DeviceConfig,
}

impl Sam2Experiment {
    /// What the trainer needs.
    pub fn setup(&self) -> Sam2Setup {
        Sam2Setup {
            model: self.model.clone(),
            data: self.data.clone(),
            loss: self.loss.clone(),
            prompts: self.prompts.clone(),
            train: self.train.clone(),
            experiment_text: self.to_ron(),
        }
    }
}

impl ExperimentFile for Sam2Experiment {
    fn resolve_paths(&mut self) {
        let fix = |p: &mut PathBuf| *p = absolute(p);
        match &mut self.data.source {
            ObjectSource::SemanticComponents { layout, .. } => {
                layout.paths_mut().into_iter().for_each(fix)
            }
            ObjectSource::InstanceMasks {
                images, instances, ..
            } => {
                fix(images);
                fix(instances);
            }
            ObjectSource::ObjectMaskFolders { images, masks, .. } => {
                fix(images);
                fix(masks);
            }
        }
        if let Some(dir) = &mut self.data.embeddings {
            fix(dir);
        }
        fix(&mut self.train.run_dir);
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.device.count() == 0 {
            return Err(ConfigError::Invalid(
                "device: give at least one device".into(),
            ));
        }
        // The config errors' own messages: `TrainError` would prefix its
        // "invalid configuration: " a second time.
        self.setup().check().map_err(|e| match e {
            TrainError::TrainConfig(e) => ConfigError::Invalid(e.to_string()),
            TrainError::TaskConfig(e) => ConfigError::Invalid(e.to_string()),
            other => ConfigError::Invalid(other.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use segburn_train::sam2::{HieraTrunk, ImageEncoderChoice};

    /// Every SAM2 experiment shipped in configs/ parses and passes the checks; the SAM 2.1
    /// fine-tune keeps the official recipe's values.
    #[test]
    fn shipped_sam2_configs_load() {
        let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut loaded = Vec::new();
        for entry in std::fs::read_dir(&configs).expect("configs/") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            if name.starts_with("sam2") {
                Sam2Experiment::load(&path, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
                loaded.push(name);
            }
        }
        loaded.sort();
        assert_eq!(
            loaded,
            [
                "sam2.1_hiera_t_cached.ron",
                "sam2.1_hiera_t_finetune.ron",
                "sam2_cached.ron",
                "sam2_decoder.ron"
            ]
        );
        let tune = Sam2Experiment::load(&configs.join("sam2.1_hiera_t_finetune.ron"), &[])
            .expect("fine-tune");
        assert_eq!(
            tune.model.image_encoder,
            ImageEncoderChoice::Hiera {
                size: HieraTrunk::Tiny,
                drop_path_rate: 0.1
            }
        );
        assert_eq!(tune.model.image_size, 1024);
        assert_eq!(tune.model.transformer_dim, 256);
        assert_eq!(
            (tune.train.lr, tune.model.image_encoder_lr_mult),
            (5e-6, 0.6)
        );
        assert_eq!(tune.model.image_encoder_layer_decay, Some(0.9));
        assert_eq!(tune.train.seed, 123);
        let cached =
            Sam2Experiment::load(&configs.join("sam2.1_hiera_t_cached.ron"), &[]).expect("cached");
        assert!(cached.model.image_encoder.is_none() && cached.data.embeddings.is_some());
        // `--set` reaches the encoder form too.
        let frozen = Sam2Experiment::load(
            &configs.join("sam2.1_hiera_t_finetune.ron"),
            &[
                "model.freeze_image_encoder=true".into(),
                "model.image_encoder=None".into(),
            ],
        );
        let error = frozen.expect_err("nothing to freeze").to_string();
        assert!(error.contains("freeze_image_encoder"), "{error}");
    }

    /// A partly written section (`optimizer: AdamW((beta2: 0.99))`, `schedule:
    /// Cosine(warmup_steps: 100)`) keeps the SAM 2.1 recipe's values for the fields it leaves
    /// out, in every section.
    #[test]
    fn partial_sections_take_the_experiment_defaults() {
        let foreign = crate::experiment::file::sections_with_foreign_defaults::<Sam2Experiment>();
        assert!(foreign.is_empty(), "sections: {foreign:?}");
    }

    /// A value the train section or the SAM2 sections refuse is reported once as an invalid
    /// configuration, naming the field, not wrapped in a second "invalid configuration: ".
    #[test]
    fn a_refused_value_is_reported_once() {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/sam2_decoder.ron");
        for (set, field) in [
            ("train.lr=-1.0", "lr"),
            ("model.image_encoder_lr_mult=0.0", "image_encoder_lr_mult"),
        ] {
            let message = match Sam2Experiment::load(&config, &[set.into()]) {
                Ok(_) => panic!("{set} was accepted"),
                Err(e) => e.to_string(),
            };
            assert_eq!(
                message.matches("invalid configuration").count(),
                1,
                "{set}: {message}"
            );
            assert!(message.contains(field), "{set}: {message}");
        }
    }
}

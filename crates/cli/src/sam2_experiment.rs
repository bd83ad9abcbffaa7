//! The SAM2 experiment file: one RON file = one promptable-segmentation run. Like
//! [`crate::experiment::Experiment`], the root only composes each layer's configuration
//! (model, data, loss, prompts, train) and picks the device.

use std::path::{Path, PathBuf};

use segburn_data::layout::Layout;
use segburn_data::objects::{ObjectDataConfig, ObjectSource};
use segburn_train::loss::sam::SamLossConfig;
use segburn_train::sam::{PromptConfig, Sam2ModelConfig, Sam2TrainConfig, Sam2TrainerSetup};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config_error::{nearest, ConfigError};
use crate::experiment::{absolute, DeviceConfig};
use crate::overrides::parse_value;

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
    /// Reads `path`, applies `--set key=value` overrides, makes relative paths absolute
    /// (against the current directory) and checks every section.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: absolute(path),
            source,
        })?;
        let experiment: Sam2Experiment = ron::de::from_str(&text)
            .map_err(|error| ConfigError::from_ron(&absolute(path), &text, error))?;
        let mut experiment = apply_overrides(experiment, overrides)?;
        experiment.resolve_paths();
        experiment.check()?;
        Ok(experiment)
    }

    /// The experiment as RON, every default filled in.
    pub fn to_ron(&self) -> String {
        let config = ron::ser::PrettyConfig::new().struct_names(false);
        ron::ser::to_string_pretty(self, config).unwrap_or_else(|e| format!("/* {e} */"))
    }

    /// What the trainer needs.
    pub fn setup(&self) -> Sam2TrainerSetup {
        Sam2TrainerSetup {
            model: self.model.clone(),
            data: self.data.clone(),
            loss: self.loss.clone(),
            prompts: self.prompts.clone(),
            train: self.train.clone(),
            experiment_text: self.to_ron(),
        }
    }

    fn resolve_paths(&mut self) {
        let fix = |p: &mut PathBuf| *p = absolute(p);
        match &mut self.data.source {
            ObjectSource::SemanticComponents { layout, .. } => match layout {
                Layout::Cityscapes { root } | Layout::CamVid { root, .. } => fix(root),
                Layout::ListFile { root, list, .. } => {
                    fix(root);
                    fix(list);
                }
                Layout::FolderPair { images, masks, .. } => {
                    fix(images);
                    fix(masks);
                }
            },
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
        if self.device.count() != 1 {
            return Err(ConfigError::Invalid(format!(
                "device: SAM2 trains on one device; got {:?}",
                self.device
            )));
        }
        self.setup()
            .check()
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }
}

/// `--set key.path=value` for any serde experiment root: the root becomes a JSON tree, the value
/// at the dotted path is replaced (read with [`parse_value`]), and the tree becomes the root
/// again, so an override is checked exactly like the file.
pub fn apply_overrides<T: Serialize + DeserializeOwned>(
    root: T,
    overrides: &[String],
) -> Result<T, ConfigError> {
    if overrides.is_empty() {
        return Ok(root);
    }
    let mut tree = serde_json::to_value(&root).map_err(|e| ConfigError::Override(e.to_string()))?;
    for assignment in overrides {
        let Some((path, raw)) = assignment.split_once('=') else {
            return Err(ConfigError::Override(format!(
                "`{assignment}` is not key=value (e.g. --set train.lr=0.0001)"
            )));
        };
        let mut node = &mut tree;
        let parts: Vec<&str> = path.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let Value::Object(map) = node else {
                return Err(ConfigError::Override(format!(
                    "`{}` is not a section, so `{path}` cannot be set",
                    parts[..i].join(".")
                )));
            };
            if !map.contains_key(*part) {
                let keys: Vec<String> = map.keys().cloned().collect();
                let names: Vec<&str> = keys.iter().map(String::as_str).collect();
                let hint = nearest(part, &names)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(ConfigError::Override(format!(
                    "`{path}`: no field `{part}` (fields here: {}){hint}",
                    names.join(", ")
                )));
            }
            node = map.get_mut(*part).expect("checked above");
        }
        *node = parse_value(raw);
    }
    serde_json::from_value(tree).map_err(|e| ConfigError::Override(e.to_string()))
}

/// One differing field: `(dotted path, checkpoint value, current value)`.
pub type Difference = (String, String, String);

/// Differences between two experiments as `(dotted path, old, new)`, split into those a
/// resume cannot follow (the model, the seed, the data's source and batch structure) and
/// harmless ones (epochs, logging, evaluation).
pub fn resume_differences(
    saved: &Sam2Experiment,
    current: &Sam2Experiment,
) -> (Vec<Difference>, Vec<Difference>) {
    const BREAKING: &[&str] = &[
        "model.",
        "train.seed",
        "data.source.",
        "data.batch_size",
        "data.objects_per_image",
        "data.embeddings",
    ];
    fn flatten(prefix: &str, value: &Value, out: &mut std::collections::BTreeMap<String, String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&path, v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let (mut a, mut b) = (Default::default(), Default::default());
    flatten(
        "",
        &serde_json::to_value(saved).unwrap_or(Value::Null),
        &mut a,
    );
    flatten(
        "",
        &serde_json::to_value(current).unwrap_or(Value::Null),
        &mut b,
    );
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let (mut breaking, mut harmless) = (Vec::new(), Vec::new());
    for key in keys {
        let old = a.get(key).cloned().unwrap_or_else(|| "(absent)".into());
        let new = b.get(key).cloned().unwrap_or_else(|| "(absent)".into());
        if old == new {
            continue;
        }
        let is_breaking = BREAKING
            .iter()
            .any(|p| key == p.trim_end_matches('.') || key.starts_with(p));
        let difference = (key.clone(), old, new);
        if is_breaking {
            breaking.push(difference);
        } else {
            harmless.push(difference);
        }
    }
    (breaking, harmless)
}

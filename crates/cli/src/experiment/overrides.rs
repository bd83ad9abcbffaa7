//! `--set key.path=value`: command-line overrides of any field of an experiment root (PIDNet's
//! `PidNetExperiment`, SAM2's `Sam2Experiment`).
//!
//! The experiment is turned into a JSON tree, the value at the dotted path replaced, and the
//! tree turned back into an experiment, so an override is checked exactly like the file.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::experiment::config_error::{nearest, ConfigError};

/// Applies each `key=value`; see [`parse_value`] for how values are read.
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
                "`{assignment}` is not key=value (e.g. --set train.lr=0.005)"
            )));
        };
        let value = parse_value(raw);
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
                let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                let hint = nearest(part, &keys)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(ConfigError::Override(format!(
                    "`{path}`: no field `{part}` (fields here: {}){hint}",
                    keys.join(", ")
                )));
            }
            node = map.get_mut(*part).expect("checked above");
        }
        *node = value;
    }
    serde_json::from_value(tree).map_err(|e| ConfigError::Override(e.to_string()))
}

/// Reads an override value: JSON (`4`, `true`, `"text"`, `[0, 1]`), RON's `None`, `Some(x)`,
/// structs (`(thresh: 0.7, min_kept: 100000)`) and enum variants with a value
/// (`Cuda(0)`, `Cuda([0, 1])`, in serde's JSON form `{"Cuda": 0}`), else a plain string
/// (`Bf16`, `checkpoints/run2`).
pub fn parse_value(raw: &str) -> Value {
    let raw = raw.trim();
    if let Ok(value) = serde_json::from_str(raw) {
        return value;
    }
    if raw == "None" {
        return Value::Null;
    }
    if raw.starts_with('(') && raw.ends_with(')') {
        let as_json = ron::de::from_str::<ron::Value>(raw)
            .ok()
            .and_then(|v| serde_json::to_value(v).ok());
        if let Some(value) = as_json {
            return value;
        }
    }
    if let Some((name, inner)) = raw.strip_suffix(')').and_then(|r| r.split_once('(')) {
        let is_identifier =
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if is_identifier {
            let inner = parse_value(inner);
            return if name == "Some" {
                inner
            } else {
                Value::Object([(name.to_string(), inner)].into_iter().collect())
            };
        }
    }
    Value::String(raw.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::PidNetExperiment;

    #[test]
    fn sets_nested_fields_and_rejects_unknown_ones() {
        let e = apply_overrides(
            PidNetExperiment::default(),
            &[
                "train.lr=0.005".into(),
                "train.precision=Bf16".into(),
                "data.train_loader.batch_size=4".into(),
            ],
        )
        .unwrap();
        assert_eq!(e.train.lr, 0.005);
        assert_eq!(
            e.train.precision,
            segburn_train::mixed_precision::Precision::Bf16
        );
        assert_eq!(e.data.train_loader.batch_size, 4);

        let e = apply_overrides(
            PidNetExperiment::default(),
            &[
                "device=Cuda([0, 1])".into(),
                "train.grad_clip_norm=Some(1.5)".into(),
                "train.max_steps=None".into(),
            ],
        )
        .unwrap();
        assert_eq!(e.device.count(), 2);
        assert_eq!(e.train.grad_clip_norm, Some(1.5));
        let e = apply_overrides(PidNetExperiment::default(), &["device=Cuda(1)".into()]).unwrap();
        assert_eq!(e.device, crate::experiment::DeviceConfig::cuda(1));
        let e = apply_overrides(
            PidNetExperiment::default(),
            &["loss.ohem=(thresh: 0.7, min_kept: 100000)".into()],
        )
        .unwrap();
        assert_eq!((e.loss.ohem.thresh, e.loss.ohem.min_kept), (0.7, 100000));

        let err = apply_overrides(PidNetExperiment::default(), &["train.lrr=1".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean `lr`?"), "{err}");
        let err = apply_overrides(PidNetExperiment::default(), &["train.lr=-x".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--set"), "{err}");
    }
}

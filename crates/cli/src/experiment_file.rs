//! An experiment root (PIDNet's `Experiment`, SAM2's `Sam2Experiment`) from its RON file with
//! the `--set` overrides applied, and back to RON.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config_error::ConfigError;
use crate::experiment::absolute;
use crate::overrides::apply_overrides;

/// Reads and parses `path` (errors name the file, line and column), then applies `overrides`.
pub fn read_experiment<T: Serialize + DeserializeOwned>(
    path: &Path,
    overrides: &[String],
) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: absolute(path),
        source,
    })?;
    let experiment: T = ron::de::from_str(&text)
        .map_err(|error| ConfigError::from_ron(&absolute(path), &text, error))?;
    apply_overrides(experiment, overrides)
}

/// `value` as pretty RON without struct names, every field written out.
pub fn to_pretty_ron<T: Serialize>(value: &T) -> String {
    let config = ron::ser::PrettyConfig::new().struct_names(false);
    ron::ser::to_string_pretty(value, config).unwrap_or_else(|e| format!("/* {e} */"))
}

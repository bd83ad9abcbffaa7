//! An experiment root (PIDNet's `PidNetExperiment`, SAM2's `Sam2Experiment`) from its RON file with
//! the `--set` overrides applied, and back to RON.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::experiment::config_error::ConfigError;
use crate::experiment::overrides::apply_overrides;

/// An experiment root as a file: each root says how it resolves its paths and checks itself;
/// loading and printing are the same for all of them.
pub trait ExperimentFile: Serialize + DeserializeOwned {
    /// Makes relative paths absolute (against the current directory), so that every message
    /// shows where it looked.
    fn resolve_paths(&mut self);
    /// Checks every section; the error names the field.
    fn check(&self) -> Result<(), ConfigError>;

    /// Reads `path`, applies `--set key=value` overrides, resolves the paths and checks.
    fn load(path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut experiment: Self = read_experiment(path, overrides)?;
        experiment.resolve_paths();
        experiment.check()?;
        Ok(experiment)
    }

    /// The experiment as RON, every default filled in.
    fn to_ron(&self) -> String {
        to_pretty_ron(self)
    }
}

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

/// The nested sections of `T`'s default whose fields, when a user writes the section partly,
/// would not take the default of the experiment but that of the section's own type: for each
/// section (and enum payload) the default tree is read back with that section emptied, the
/// way serde fills a partly written section. Sections with required fields are skipped (they
/// have no defaults to take).
/// `path` made absolute against the current directory (it need not exist).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
pub(crate) fn sections_with_foreign_defaults<T>() -> Vec<String>
where
    T: Serialize + DeserializeOwned + Default + PartialEq,
{
    use serde_json::Value;
    fn sections(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if let Value::Object(map) = value {
            if !path.is_empty() {
                out.push(path.clone());
            }
            for (key, child) in map {
                path.push(key.clone());
                sections(child, path, out);
                path.pop();
            }
        }
    }
    let default = T::default();
    let tree = serde_json::to_value(&default).expect("an experiment serialises");
    let mut paths = Vec::new();
    sections(&tree, &mut Vec::new(), &mut paths);
    paths
        .into_iter()
        .filter(|path| {
            let mut emptied = tree.clone();
            let mut node = &mut emptied;
            for key in path {
                node = &mut node[key.as_str()];
            }
            *node = Value::Object(Default::default());
            serde_json::from_value::<T>(emptied).is_ok_and(|back| back != default)
        })
        .map(|path| path.join("."))
        .collect()
}

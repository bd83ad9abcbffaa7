//! What a weight load did: the keys loaded, missing, unexpected and mis-shaped.

use std::fmt;

/// The outcome of matching a file's keys to a model's parameters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReport {
    /// Official keys whose tensors were loaded.
    pub loaded: Vec<String>,
    /// Keys the model has but the file lacks (left at their initial values).
    pub missing: Vec<String>,
    /// Keys the file has but the model does not use.
    pub unexpected: Vec<String>,
    /// Keys present in both with different shapes: `(key, file shape, model shape)`.
    pub shape_mismatched: Vec<(String, Vec<usize>, Vec<usize>)>,
    /// Keys of modules the file's model has and this model leaves out on purpose (SAM2's video
    /// memory in an image model); they never fail a load.
    pub not_used: Vec<String>,
}

impl LoadReport {
    /// True when every model key was loaded and the file had nothing else.
    pub fn is_exact(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty() && self.shape_mismatched.is_empty()
    }
}

fn list(f: &mut fmt::Formatter<'_>, title: &str, keys: &[String]) -> fmt::Result {
    if keys.is_empty() {
        return Ok(());
    }
    writeln!(f, "  {title} ({}):", keys.len())?;
    const SHOWN: usize = 12;
    for key in keys.iter().take(SHOWN) {
        writeln!(f, "    {key}")?;
    }
    if keys.len() > SHOWN {
        writeln!(f, "    … and {} more", keys.len() - SHOWN)?;
    }
    Ok(())
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  loaded: {} tensors", self.loaded.len())?;
        list(f, "missing from the file", &self.missing)?;
        list(f, "unexpected in the file", &self.unexpected)?;
        list(f, "not used by this model", &self.not_used)?;
        if !self.shape_mismatched.is_empty() {
            writeln!(f, "  shape mismatch ({}):", self.shape_mismatched.len())?;
            for (key, file, model) in &self.shape_mismatched {
                writeln!(f, "    {key}: file {file:?}, model {model:?}")?;
            }
        }
        Ok(())
    }
}

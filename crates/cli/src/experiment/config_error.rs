//! Configuration errors: the file, line and column, the offending line, and the nearest valid
//! name when a field or variant is misspelt.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum ConfigError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
        source_line: String,
        suggestion: Option<String>,
    },
    Override(String),
    Invalid(String),
}

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, source } => {
                write!(
                    f,
                    "cannot read the config file {}: {source}",
                    path.display()
                )
            }
            ConfigError::Parse {
                path,
                line,
                column,
                message,
                source_line,
                suggestion,
            } => {
                writeln!(f, "{}:{line}:{column}: {message}", path.display())?;
                writeln!(f, "{line:>5} | {source_line}")?;
                write!(f, "      | {}^", " ".repeat(column.saturating_sub(1)))?;
                if let Some(s) = suggestion {
                    write!(f, "\n      = did you mean `{s}`?")?;
                }
                Ok(())
            }
            ConfigError::Override(m) => write!(f, "--set: {m}"),
            ConfigError::Invalid(m) => write!(f, "invalid configuration: {m}"),
        }
    }
}

impl ConfigError {
    pub fn from_ron(path: &std::path::Path, text: &str, error: ron::error::SpannedError) -> Self {
        let (message, suggestion) = describe(&error.code);
        let line = error.position.line;
        let source_line = text
            .lines()
            .nth(line.saturating_sub(1))
            .unwrap_or_default()
            .to_string();
        ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            column: error.position.col,
            message,
            source_line,
            suggestion,
        }
    }
}

/// Fields that moved when PIDNet and SAM2 came to share one `train` section (and the data
/// became the one owner of the ignore index): `(struct, field, where it lives now)`.
const MOVED_FIELDS: &[(&str, &str, &str)] = &[
    (
        "TrainConfig",
        "eval_corrections",
        "prompts.eval_corrections",
    ),
    (
        "TrainConfig",
        "image_encoder_lr_mult",
        "model.image_encoder_lr_mult",
    ),
    (
        "TrainConfig",
        "image_encoder_layer_decay",
        "model.image_encoder_layer_decay",
    ),
    (
        "TrainConfig",
        "gate_masks_by_object_score",
        "model.gate_masks_by_object_score",
    ),
    ("PidNetLossConfig", "ignore_index", "data.ignore_index"),
];

/// Where a field that is no longer in `outer` went.
fn moved_to(outer: Option<&str>, field: &str) -> Option<&'static str> {
    MOVED_FIELDS
        .iter()
        .find(|(owner, name, _)| Some(*owner) == outer && *name == field)
        .map(|(_, _, to)| *to)
}

fn describe(code: &ron::error::Error) -> (String, Option<String>) {
    use ron::error::Error;
    match code {
        Error::NoSuchStructField { found, outer, .. }
            if moved_to(outer.as_deref(), found).is_some() =>
        {
            let to = moved_to(outer.as_deref(), found).unwrap_or_default();
            (
                format!(
                    "`{found}` has moved to `{to}` (the `train` section is shared by every task; \
                     task-specific settings live in the task's sections, and `data.ignore_index` \
                     is the one ignore index of data, losses and metrics): write it there"
                ),
                None,
            )
        }
        Error::NoSuchStructField {
            expected,
            found,
            outer,
        } => (
            format!(
                "unknown field `{found}`{}; valid fields: {}",
                outer
                    .as_ref()
                    .map(|o| format!(" in `{o}`"))
                    .unwrap_or_default(),
                expected.join(", ")
            ),
            nearest(found, expected),
        ),
        Error::NoSuchEnumVariant {
            expected,
            found,
            outer,
        } => (
            format!(
                "unknown value `{found}`{}; expected one of: {}",
                outer
                    .as_ref()
                    .map(|o| format!(" for `{o}`"))
                    .unwrap_or_default(),
                expected.join(", ")
            ),
            nearest(found, expected),
        ),
        other => (other.to_string(), None),
    }
}

/// The candidate closest to `word` by edit distance, if it is close enough to be a typo.
pub fn nearest(word: &str, candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min()
        .map(|(_, c)| c.to_string())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_field() {
        assert_eq!(
            nearest("bacth_size", &["batch_size", "shuffle"]),
            Some("batch_size".into())
        );
        assert_eq!(nearest("zzz", &["batch_size", "shuffle"]), None);
    }

    /// An experiment written for an earlier segburn names where a moved field lives now.
    #[test]
    fn moved_fields_say_where_they_went() {
        let text = "(\n    train: (lr: 0.01, eval_corrections: 3),\n)\n";
        let error = ron::de::from_str::<crate::experiment::Sam2Experiment>(text).unwrap_err();
        let message =
            ConfigError::from_ron(std::path::Path::new("/x/sam2.ron"), text, error).to_string();
        assert!(message.starts_with("/x/sam2.ron:2:"), "{message}");
        assert!(
            message.contains("`eval_corrections` has moved to `prompts.eval_corrections`"),
            "{message}"
        );
        let text = "(loss: (ignore_index: 255))";
        let error = ron::de::from_str::<crate::experiment::PidNetExperiment>(text).unwrap_err();
        let message =
            ConfigError::from_ron(std::path::Path::new("/x/p.ron"), text, error).to_string();
        assert!(
            message.contains("moved to `data.ignore_index`"),
            "{message}"
        );
    }

    #[test]
    fn parse_errors_show_file_line_column_and_the_line() {
        let text = "(\n    train: (lr: 0.01, epoch: 3),\n)\n";
        let error = ron::de::from_str::<crate::experiment::PidNetExperiment>(text).unwrap_err();
        let message =
            ConfigError::from_ron(std::path::Path::new("/x/exp.ron"), text, error).to_string();
        assert!(message.starts_with("/x/exp.ron:2:"), "{message}");
        assert!(message.contains("unknown field `epoch`"), "{message}");
        assert!(message.contains("did you mean `epochs`?"), "{message}");
        assert!(
            message.contains("train: (lr: 0.01, epoch: 3),"),
            "{message}"
        );
    }
}

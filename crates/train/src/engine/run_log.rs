//! The files a run writes besides checkpoints: `train.log` (every message, flushed per line),
//! `metrics.jsonl` and `metrics.csv` (one row per logged step or validation), appended so a
//! resumed run continues them. The engine writes them for every task; the CSV columns are a
//! row's fields in order.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One row of the metrics files: `kind` (`train` or `val`), the position, and the task's
/// columns in a fixed order (the engine writes every column in every row, `None` where a row
/// has nothing, so the CSV header of the first row fits them all).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsRow {
    pub kind: &'static str,
    pub step: u64,
    pub epoch: u64,
    pub lr: f64,
    pub columns: Vec<(&'static str, Option<f64>)>,
}

impl Serialize for MetricsRow {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(4 + self.columns.len()))?;
        map.serialize_entry("kind", self.kind)?;
        map.serialize_entry("step", &self.step)?;
        map.serialize_entry("epoch", &self.epoch)?;
        map.serialize_entry("lr", &self.lr)?;
        for (name, value) in &self.columns {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// Append-only run log files.
pub struct RunLog {
    text: File,
    jsonl: File,
    csv: File,
    csv_is_new: bool,
    dir: PathBuf,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// A JSON scalar as a CSV cell (`null` → empty, strings unquoted).
fn cell(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl RunLog {
    /// Opens (appending, creating `dir`) the log files of a run.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let csv_path = dir.join("metrics.csv");
        let csv_is_new = !csv_path.exists();
        Ok(Self {
            text: open_append(&dir.join("train.log"))?,
            jsonl: open_append(&dir.join("metrics.jsonl"))?,
            csv: open_append(&csv_path)?,
            csv_is_new,
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends a line to `train.log` and flushes it.
    pub fn line(&mut self, message: &str) -> std::io::Result<()> {
        writeln!(self.text, "{message}")?;
        self.text.flush()
    }

    /// Appends a metrics row to both metrics files (the CSV header comes from the first row).
    pub fn metrics<R: Serialize>(&mut self, row: &R) -> std::io::Result<()> {
        let json = serde_json::to_string(row).map_err(std::io::Error::other)?;
        writeln!(self.jsonl, "{json}")?;
        self.jsonl.flush()?;
        // Serialising into a JSON *string* keeps field order; re-reading it as a list of
        // key/value pairs keeps that order for the columns.
        let fields: Vec<(String, serde_json::Value)> = serde_json::from_str::<OrderedFields>(&json)
            .map_err(std::io::Error::other)?
            .0;
        if self.csv_is_new {
            let header: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
            writeln!(self.csv, "{}", header.join(","))?;
            self.csv_is_new = false;
        }
        let cells: Vec<String> = fields.iter().map(|(_, v)| cell(v)).collect();
        writeln!(self.csv, "{}", cells.join(","))?;
        self.csv.flush()
    }
}

/// A JSON object's fields in file order (serde_json's map would sort them).
struct OrderedFields(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for OrderedFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = OrderedFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a flat object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<OrderedFields, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(OrderedFields(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_columns_follow_the_row_struct_and_resume_appends() {
        let dir = tempfile::tempdir().unwrap();
        let row = MetricsRow {
            kind: "train",
            step: 3,
            epoch: 0,
            lr: 0.01,
            columns: vec![("loss", Some(1.5)), ("loss_aux", None), ("mean_iou", None)],
        };
        RunLog::open(dir.path()).unwrap().metrics(&row).unwrap();
        RunLog::open(dir.path()).unwrap().metrics(&row).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("metrics.csv")).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3, "one header, then one line per row:\n{csv}");
        assert_eq!(lines[0], "kind,step,epoch,lr,loss,loss_aux,mean_iou");
        assert_eq!(lines[1], "train,3,0,0.01,1.5,,");
        let jsonl = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
        assert_eq!(jsonl.lines().count(), 2);
    }
}

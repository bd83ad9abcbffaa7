//! The files a SAM2 run writes besides checkpoints: `train.log` (every message, flushed per
//! line), `metrics.jsonl` and `metrics.csv` (one row per logged step or evaluation), appended
//! so a resumed run continues them.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One row of the metrics files.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Sam2MetricsRow {
    /// `train` or `val`.
    pub kind: &'static str,
    pub step: u64,
    pub epoch: u64,
    pub lr: f64,
    pub loss: Option<f64>,
    pub loss_mask: Option<f64>,
    pub loss_dice: Option<f64>,
    pub loss_iou: Option<f64>,
    pub loss_class: Option<f64>,
    pub grad_norm: Option<f64>,
    pub objects: Option<usize>,
    pub seconds: Option<f64>,
    pub iou_one_click: Option<f64>,
    pub iou_one_box: Option<f64>,
    pub iou_corrected: Option<f64>,
}

const CSV_HEADER: &str = "kind,step,epoch,lr,loss,loss_mask,loss_dice,loss_iou,loss_class,grad_norm,objects,seconds,iou_one_click,iou_one_box,iou_corrected";

/// Append-only run log files.
pub struct Sam2RunLog {
    text: File,
    jsonl: File,
    csv: File,
    dir: PathBuf,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Sam2RunLog {
    /// Opens (appending) the log files in `dir`, creating it.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let csv_path = dir.join("metrics.csv");
        let new_csv = !csv_path.exists();
        let mut csv = open_append(&csv_path)?;
        if new_csv {
            writeln!(csv, "{CSV_HEADER}")?;
        }
        Ok(Self {
            text: open_append(&dir.join("train.log"))?,
            jsonl: open_append(&dir.join("metrics.jsonl"))?,
            csv,
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

    /// Appends a row to both metrics files.
    pub fn metrics(&mut self, row: &Sam2MetricsRow) -> std::io::Result<()> {
        let json = serde_json::to_string(row).map_err(std::io::Error::other)?;
        writeln!(self.jsonl, "{json}")?;
        self.jsonl.flush()?;
        let opt = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
        writeln!(
            self.csv,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            row.kind,
            row.step,
            row.epoch,
            row.lr,
            opt(row.loss),
            opt(row.loss_mask),
            opt(row.loss_dice),
            opt(row.loss_iou),
            opt(row.loss_class),
            opt(row.grad_norm),
            row.objects.map(|n| n.to_string()).unwrap_or_default(),
            opt(row.seconds),
            opt(row.iou_one_click),
            opt(row.iou_one_box),
            opt(row.iou_corrected)
        )?;
        self.csv.flush()
    }
}

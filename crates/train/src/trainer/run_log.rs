//! The files a run writes besides checkpoints: `train.log` (every message, flushed per line),
//! `metrics.jsonl` and `metrics.csv` (one row per logged step or validation).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One row of the metrics files.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricsRow {
    /// `train` or `val`.
    pub kind: &'static str,
    pub step: u64,
    pub epoch: u64,
    pub lr: f64,
    pub loss: Option<f64>,
    pub loss_aux: Option<f64>,
    pub loss_main: Option<f64>,
    pub loss_boundary: Option<f64>,
    pub loss_bas: Option<f64>,
    pub grad_norm: Option<f64>,
    pub loss_scale: Option<f64>,
    pub images_per_second: Option<f64>,
    pub mean_iou: Option<f64>,
    pub pixel_accuracy: Option<f64>,
}

const CSV_HEADER: &str = "kind,step,epoch,lr,loss,loss_aux,loss_main,loss_boundary,loss_bas,grad_norm,loss_scale,images_per_second,mean_iou,pixel_accuracy";

/// Append-only run log files.
pub struct RunLog {
    text: File,
    jsonl: File,
    csv: File,
    dir: PathBuf,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl RunLog {
    /// Opens (appending, so a resumed run continues the same files) the logs in `dir`.
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

    /// Appends a metrics row to both metrics files.
    pub fn metrics(&mut self, row: &MetricsRow) -> std::io::Result<()> {
        let json = serde_json::to_string(row).map_err(std::io::Error::other)?;
        writeln!(self.jsonl, "{json}")?;
        self.jsonl.flush()?;
        let opt = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
        writeln!(
            self.csv,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            row.kind,
            row.step,
            row.epoch,
            row.lr,
            opt(row.loss),
            opt(row.loss_aux),
            opt(row.loss_main),
            opt(row.loss_boundary),
            opt(row.loss_bas),
            opt(row.grad_norm),
            opt(row.loss_scale),
            opt(row.images_per_second),
            opt(row.mean_iou),
            opt(row.pixel_accuracy)
        )?;
        self.csv.flush()
    }
}

//! The benchmark suite's results: one row per measured workload, where and when they were
//! measured (machine, load average, commit), the printed table, the JSON file, and the ratios
//! against a previous JSON (`--compare`).

use std::fmt::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One measured workload. `value` is always a rate (higher is better), so a ratio above 1
/// against an older file means faster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteRow {
    /// Unique within a report, used to match rows across files: `train/PIDNet-S/bf16/2x3x512x512`.
    pub key: String,
    pub workload: String,
    pub model: String,
    pub precision: String,
    pub shape: String,
    pub value: f64,
    /// `images/s`, `FPS`, `calls/s`, `steps/s`.
    pub unit: String,
    pub median_ms: f64,
    pub min_ms: f64,
    pub runs: usize,
    pub peak_memory_bytes: Option<u64>,
    /// Where the peak comes from (`RSS (VmHWM)`), or why there is none.
    pub peak_memory_note: String,
}

/// The machine a report was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub os: String,
    pub cpu_threads: usize,
    /// 1, 5 and 15-minute load averages before and after the run (`/proc/loadavg`): other
    /// programs competing for the cores make the numbers slower.
    pub load_average_before: Option<[f64; 3]>,
    pub load_average_after: Option<[f64; 3]>,
}

/// A whole `bench` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteReport {
    pub segburn_version: String,
    pub commit: String,
    /// Seconds since 1970-01-01 UTC.
    pub unix_time: u64,
    pub device: String,
    pub smoke: bool,
    pub machine: MachineInfo,
    pub rows: Vec<SuiteRow>,
}

/// The three load averages of `/proc/loadavg`.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// `SEGBURN_COMMIT`, else `git rev-parse --short HEAD`, else "unknown".
pub fn current_commit() -> String {
    if let Ok(commit) = std::env::var("SEGBURN_COMMIT") {
        return commit;
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

fn memory(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        Some(b) => format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64),
        None => "n/a".to_string(),
    }
}

fn loads(load: Option<[f64; 3]>) -> String {
    load.map_or("n/a".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
}

impl SuiteReport {
    /// An aligned text table with a header naming the machine and the load.
    pub fn table(&self) -> String {
        let m = &self.machine;
        let mut out = format!(
            "segburn {} (commit {}) on {}, {} CPU threads, device {}{}\nload average (1/5/15 min): {} before, {} after\n",
            self.segburn_version,
            self.commit,
            m.os,
            m.cpu_threads,
            self.device,
            if self.smoke { ", SMOKE (tiny sizes, one run: not a measurement)" } else { "" },
            loads(m.load_average_before),
            loads(m.load_average_after),
        );
        let _ = writeln!(
            out,
            "{:<10} {:<23} {:<6} {:<18} {:>16} {:>11} {:>11}  peak memory",
            "workload", "model", "dtype", "shape", "rate", "median ms", "min ms"
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{:<10} {:<23} {:<6} {:<18} {:>16} {:>11.1} {:>11.1}  {} {}",
                r.workload,
                r.model,
                r.precision,
                r.shape,
                format!("{:.2} {}", r.value, r.unit),
                r.median_ms,
                r.min_ms,
                memory(r.peak_memory_bytes),
                r.peak_memory_note
            );
        }
        out
    }

    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// Reads a report written with `--json`.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a segburn bench JSON file: {e}", path.display()))
    }

    /// new / old for every row both reports have, and the rows only one of them has.
    pub fn comparison(&self, old: &SuiteReport) -> String {
        let mut out = format!(
            "compared with commit {} on device {} ({} CPU threads, load {}): ratio = new / old, above 1 is faster\n",
            old.commit,
            old.device,
            old.machine.cpu_threads,
            loads(old.machine.load_average_before)
        );
        let _ = writeln!(
            out,
            "{:<48} {:>12} {:>12} {:>8}",
            "workload", "old", "new", "ratio"
        );
        for row in &self.rows {
            match old.rows.iter().find(|o| o.key == row.key) {
                Some(before) => {
                    let ratio = row.value / before.value;
                    let _ = writeln!(
                        out,
                        "{:<48} {:>12.3} {:>12.3} {:>7.2}x",
                        row.key, before.value, row.value, ratio
                    );
                }
                None => {
                    let _ = writeln!(out, "{:<48} {:>12} {:>12.3}", row.key, "-", row.value);
                }
            }
        }
        for before in old
            .rows
            .iter()
            .filter(|o| !self.rows.iter().any(|r| r.key == o.key))
        {
            let _ = writeln!(out, "{:<48} {:>12.3} {:>12}", before.key, before.value, "-");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, value: f64) -> SuiteRow {
        SuiteRow {
            key: key.into(),
            workload: "train".into(),
            model: "PIDNet-S".into(),
            precision: "f32".into(),
            shape: "2x3x64x64".into(),
            value,
            unit: "images/s".into(),
            median_ms: 1000.0 / value,
            min_ms: 900.0 / value,
            runs: 1,
            peak_memory_bytes: Some(3 << 29),
            peak_memory_note: "RSS (VmHWM)".into(),
        }
    }

    fn report(rows: Vec<SuiteRow>) -> SuiteReport {
        SuiteReport {
            segburn_version: "0.1.0".into(),
            commit: "abc1234".into(),
            unix_time: 0,
            device: "cpu".into(),
            smoke: false,
            machine: MachineInfo {
                os: "linux".into(),
                cpu_threads: 2,
                load_average_before: Some([1.0, 2.0, 3.0]),
                load_average_after: None,
            },
            rows,
        }
    }

    #[test]
    fn json_round_trip_table_and_ratios() {
        let new = report(vec![row("a", 4.0), row("b", 1.0)]);
        let old = report(vec![row("a", 2.0), row("c", 5.0)]);
        let back: SuiteReport = serde_json::from_str(&new.to_json().unwrap()).unwrap();
        assert_eq!(back, new);
        let table = new.table();
        assert!(table.contains("4.00 images/s"));
        assert!(table.contains("1.50 GiB RSS (VmHWM)"));
        assert!(table.contains("1.00 2.00 3.00 before, n/a after"));
        let comparison = new.comparison(&old);
        assert!(comparison.contains("2.00x"), "{comparison}");
        assert!(comparison
            .lines()
            .any(|l| l.starts_with('b') && l.contains('-')));
        assert!(comparison
            .lines()
            .any(|l| l.starts_with('c') && l.contains("5.000")));
    }

    #[test]
    fn a_bad_compare_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        std::fs::write(&path, "{}").unwrap();
        assert!(SuiteReport::read(&path).unwrap_err().contains("old.json"));
        assert!(SuiteReport::read(&dir.path().join("missing.json")).is_err());
    }
}

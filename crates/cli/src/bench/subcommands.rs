//! The `bench` binary's workloads and report formatting.

use anyhow::bail;
use burn::backend::{Autodiff, Flex};
use segburn_models::pidnet::PidNetSize;
use segburn_train::inference::InferenceConfig;
use serde::Serialize;

use crate::bench::workloads::{
    pidnet_eval_forward, pidnet_inference, pidnet_train_step, Repeats, Timing,
};

/// One measured workload.
#[derive(Debug, Serialize)]
pub struct BenchRow {
    pub name: String,
    pub shape: String,
    pub timing: Timing,
}

/// All rows of one `bench` run, with where they were measured.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub backend: String,
    pub threads: usize,
    pub rows: Vec<BenchRow>,
}

impl BenchReport {
    /// An aligned text table.
    pub fn table(&self) -> String {
        let mut out = format!("backend {}, {} CPU threads\n", self.backend, self.threads);
        out += &format!(
            "{:<34} {:>16} {:>12} {:>12}\n",
            "workload", "shape", "median ms", "min ms"
        );
        for row in &self.rows {
            out += &format!(
                "{:<34} {:>16} {:>12.1} {:>12.1}\n",
                row.name, row.shape, row.timing.median_ms, row.timing.min_ms
            );
        }
        out
    }

    pub fn to_json(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string_pretty(self)?)
    }
}

/// `bench pidnet`'s default: median of 5 after 2 warm-ups.
pub const PIDNET_REPEATS: Repeats = Repeats {
    warmups: 2,
    reps: 5,
};

pub fn parse_size(size: &str) -> anyhow::Result<PidNetSize> {
    Ok(match size.to_ascii_lowercase().as_str() {
        "s" => PidNetSize::S,
        "m" => PidNetSize::M,
        "l" => PidNetSize::L,
        other => bail!("unknown PIDNet size `{other}`: use s, m or l"),
    })
}

/// PIDNet eval forward (1×3×512×1024) and train step (2×3×256×512), median of
/// `repeats.reps` after `repeats.warmups` untimed runs, on Flex. `smoke` shrinks everything to
/// one run at 64×64.
pub fn pidnet_cpu(size: &str, repeats: Repeats, smoke: bool) -> anyhow::Result<BenchReport> {
    let size = parse_size(size)?;
    if repeats.reps == 0 {
        bail!("--reps 0: at least one timed run is needed");
    }
    let device = Default::default();
    let (eval_hw, train_nhw, warmups, reps) = if smoke {
        ([64, 64], [2, 64, 64], 0, 1)
    } else {
        ([512, 1024], [2, 256, 512], repeats.warmups, repeats.reps)
    };
    let eval = pidnet_eval_forward::<Flex>(size, eval_hw, &device, warmups, reps);
    let train = pidnet_train_step::<Autodiff<Flex>>(size, train_nhw, &device, warmups, reps);
    Ok(BenchReport {
        backend: "Flex (CPU)".into(),
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rows: vec![
            BenchRow {
                name: format!("PIDNet-{size:?} eval forward"),
                shape: format!("1x3x{}x{}", eval_hw[0], eval_hw[1]),
                timing: eval,
            },
            BenchRow {
                name: format!("PIDNet-{size:?} train step (full loss+SGD)"),
                shape: format!("{}x3x{}x{}", train_nhw[0], train_nhw[1], train_nhw[2]),
                timing: train,
            },
        ],
    })
}

/// `eval` inference FPS (whole mode, f32, as `eval` runs it: network, full-resolution
/// upsampling, argmax, download) at 1×3×1024×2048 for each of `sizes` (e.g. `s,m,l`), median of
/// 5 after one warm-up, on Flex. `smoke`: one run at 64×128.
pub fn eval_cpu(sizes: &str, smoke: bool) -> anyhow::Result<BenchReport> {
    let device = Default::default();
    let (hw, repeats) = if smoke {
        (
            [64, 128],
            Repeats {
                warmups: 0,
                reps: 1,
            },
        )
    } else {
        (
            [1024, 2048],
            Repeats {
                warmups: 1,
                reps: 5,
            },
        )
    };
    let config = InferenceConfig::default();
    let mut rows = Vec::new();
    for size in sizes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let size = parse_size(size)?;
        let timing = pidnet_inference::<Flex>(size, hw, &config, &device, repeats)?;
        rows.push(BenchRow {
            name: format!(
                "PIDNet-{size:?} eval whole f32 ({:.2} FPS)",
                1e3 / timing.median_ms.max(1e-9)
            ),
            shape: format!("1x3x{}x{}", hw[0], hw[1]),
            timing,
        });
    }
    if rows.is_empty() {
        bail!("--sizes is empty: give s, m and/or l, e.g. --sizes s,m,l");
    }
    Ok(BenchReport {
        backend: "Flex (CPU)".into(),
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::Repeats;

    const DEFAULT: Repeats = super::PIDNET_REPEATS;

    #[test]
    fn smoke_report_has_both_rows_and_valid_json() {
        let report = super::pidnet_cpu("s", DEFAULT, true).unwrap();
        assert_eq!(report.rows.len(), 2);
        let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        assert_eq!(json["rows"][1]["shape"], "2x3x64x64");
        assert!(report.table().contains("train step"));
        assert!(super::pidnet_cpu("xl", DEFAULT, true).is_err());
        let no_runs = Repeats {
            warmups: 0,
            reps: 0,
        };
        let error = super::pidnet_cpu("s", no_runs, true).unwrap_err();
        assert!(error.to_string().contains("--reps 0"), "{error}");
    }

    #[test]
    fn smoke_eval_report_has_one_row_per_size() {
        let report = super::eval_cpu("s,m", true).unwrap();
        assert_eq!(report.rows.len(), 2);
        assert!(report.rows[1].name.contains("PIDNet-M eval whole f32"));
        assert_eq!(report.rows[0].shape, "1x3x64x128");
        assert!(super::eval_cpu("", true).is_err());
        assert!(super::eval_cpu("s,x", true).is_err());
    }
}

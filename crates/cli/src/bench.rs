//! The `bench` binary's workloads and report formatting.

use anyhow::bail;
use burn::backend::{Autodiff, Flex};
use segburn_models::pidnet::PidNetSize;
use segburn_train::bench::{pidnet_eval_forward, pidnet_train_step, Timing};
use serde::Serialize;

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

pub fn parse_size(size: &str) -> anyhow::Result<PidNetSize> {
    Ok(match size.to_ascii_lowercase().as_str() {
        "s" => PidNetSize::S,
        "m" => PidNetSize::M,
        "l" => PidNetSize::L,
        other => bail!("unknown PIDNet size `{other}`: use s, m or l"),
    })
}

/// PIDNet eval forward (1×3×512×1024) and train step (2×3×256×512), median of 5 after 2
/// warm-ups, on Flex. `smoke` shrinks everything to one run at 64×64.
pub fn pidnet_cpu(size: &str, smoke: bool) -> anyhow::Result<BenchReport> {
    let size = parse_size(size)?;
    let device = Default::default();
    let (eval_hw, train_nhw, warmups, reps) = if smoke {
        ([64, 64], [2, 64, 64], 0, 1)
    } else {
        ([512, 1024], [2, 256, 512], 2, 5)
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

#[cfg(test)]
mod tests {
    #[test]
    fn smoke_report_has_both_rows_and_valid_json() {
        let report = super::pidnet_cpu("s", true).unwrap();
        assert_eq!(report.rows.len(), 2);
        let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        assert_eq!(json["rows"][1]["shape"], "2x3x64x64");
        assert!(report.table().contains("train step"));
        assert!(super::pidnet_cpu("xl", true).is_err());
    }
}

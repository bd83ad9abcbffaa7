//! One measured workload as a line of the report: its names, its rate from the median time,
//! and its peak memory (or the note that stands in for it on a GPU).

use segburn_train::mixed_precision::Precision;

use crate::bench::results::SuiteRow;
use crate::bench::workloads::{PeakSource, Timing};

pub(super) fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F32 => "f32",
        Precision::Bf16 => "bf16",
        Precision::F16 => "f16",
    }
}

/// Peak memory of one workload on this device.
pub(super) type Peak = Option<(u64, PeakSource)>;

pub(super) struct RowSpec<'a> {
    pub(super) workload: &'a str,
    pub(super) model: String,
    pub(super) precision: &'a str,
    pub(super) shape: String,
    pub(super) unit: &'a str,
    pub(super) items_per_run: f64,
}

pub(super) fn row(
    spec: RowSpec,
    timing: &Timing,
    peak: Peak,
    peak_note_cuda: Option<&str>,
) -> SuiteRow {
    let (bytes, note) = match (peak_note_cuda, peak) {
        (Some(note), _) => (None, note.to_string()),
        (None, Some((b, PeakSource::ResetVmHwm))) => (Some(b), "RSS (VmHWM)".to_string()),
        (None, Some((b, PeakSource::ProcessVmHwm))) => {
            (Some(b), "RSS (process peak so far)".to_string())
        }
        (None, None) => (None, "(no /proc: not Linux)".to_string()),
    };
    SuiteRow {
        key: format!(
            "{}/{}/{}/{}",
            spec.workload, spec.model, spec.precision, spec.shape
        ),
        workload: spec.workload.into(),
        model: spec.model,
        precision: spec.precision.into(),
        shape: spec.shape,
        value: spec.items_per_run / (timing.median_ms / 1e3).max(1e-12),
        unit: spec.unit.into(),
        median_ms: timing.median_ms,
        min_ms: timing.min_ms,
        runs: timing.runs_ms.len(),
        peak_memory_bytes: bytes,
        peak_memory_note: note,
    }
}

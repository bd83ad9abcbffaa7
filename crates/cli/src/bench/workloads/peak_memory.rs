//! Peak resident memory of this process on Linux: `VmHWM` of `/proc/self/status`, which the
//! kernel lets a process reset (write `5` to `/proc/self/clear_refs`, Linux ≥ 4.0) so that each
//! workload gets its own peak.

/// Where a peak-memory figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PeakSource {
    /// This workload's own peak (the counter was reset before it).
    ResetVmHwm,
    /// The process's peak so far (the reset failed): an upper bound for this workload.
    ProcessVmHwm,
}

/// Resets the peak to the current resident size; `false` where that is not possible.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `VmHWM` in bytes, or `None` off Linux.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// The `VmHWM:  123456 kB` line of a `/proc/<pid>/status` text, in bytes.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line["VmHWM:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Runs `f` and returns its result with the peak resident memory seen while it ran.
pub fn with_peak_rss<T>(f: impl FnOnce() -> T) -> (T, Option<(u64, PeakSource)>) {
    let source = if reset_peak_rss() {
        PeakSource::ResetVmHwm
    } else {
        PeakSource::ProcessVmHwm
    };
    let value = f();
    (value, peak_rss_bytes().map(|bytes| (bytes, source)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_parsed_and_tracks_a_big_allocation() {
        assert_eq!(parse_vm_hwm("Name: x\nVmHWM:\t  2048 kB\n"), Some(2 << 20));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
        if cfg!(target_os = "linux") {
            let (_, peak) = with_peak_rss(|| {
                let buffer = vec![1u8; 64 << 20];
                std::hint::black_box(buffer.iter().map(|&b| b as u64).sum::<u64>())
            });
            let (bytes, _) = peak.unwrap();
            assert!(bytes > 64 << 20, "{bytes}");
        }
    }
}

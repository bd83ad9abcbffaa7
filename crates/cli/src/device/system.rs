//! The machine: operating system, CPU cores and memory.

use serde::Serialize;

/// What `doctor` and `bench` report about the machine.
#[derive(Debug, Clone, Serialize)]
pub struct SystemInfo {
    /// e.g. "linux x86_64 (Ubuntu 24.04.1 LTS, kernel 6.8.0)".
    pub os: String,
    /// Threads the process may run on (`available_parallelism`: honours cgroup limits).
    pub cpu_threads: usize,
    /// `/proc/meminfo` figures; `None` where that file does not exist.
    pub memory: Option<MemoryInfo>,
}

/// Memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryInfo {
    pub total_bytes: u64,
    pub available_bytes: u64,
}

/// Reads the machine's description (a few small files; no external commands).
pub fn system_info() -> SystemInfo {
    SystemInfo {
        os: os_description(),
        cpu_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory: std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| parse_meminfo(&text)),
    }
}

fn os_description() -> String {
    let base = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| os_release_name(&text));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|k| k.trim().to_string());
    match (pretty, kernel) {
        (Some(p), Some(k)) => format!("{base} ({p}, kernel {k})"),
        (Some(p), None) => format!("{base} ({p})"),
        (None, Some(k)) => format!("{base} (kernel {k})"),
        (None, None) => base,
    }
}

/// `PRETTY_NAME` of an os-release file.
pub fn os_release_name(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// `MemTotal` and `MemAvailable` (kB in the file) of `/proc/meminfo`.
pub fn parse_meminfo(text: &str) -> Option<MemoryInfo> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim_start_matches(':')
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    let total_bytes = field("MemTotal")?;
    // Kernels before 3.14 have no MemAvailable; MemFree understates it but is all there is.
    let available_bytes = field("MemAvailable").or_else(|| field("MemFree"))?;
    Some(MemoryInfo {
        total_bytes,
        available_bytes,
    })
}

/// Bytes as GiB with one decimal.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_os_release_are_parsed() {
        let text =
            "MemTotal:       24589328 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\n";
        let memory = parse_meminfo(text).unwrap();
        assert_eq!(memory.total_bytes, 24589328 * 1024);
        assert_eq!(memory.available_bytes, 20000000 * 1024);
        assert_eq!(
            parse_meminfo("MemTotal: 8 kB\nMemFree: 4 kB\n")
                .unwrap()
                .available_bytes,
            4096
        );
        assert!(parse_meminfo("nonsense").is_none());
        let release = "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n";
        assert_eq!(
            os_release_name(release).as_deref(),
            Some("Ubuntu 24.04.1 LTS")
        );
        assert_eq!(gib(3 << 29), "1.5 GiB");
    }

    #[test]
    fn this_machine_is_described() {
        let info = system_info();
        assert!(info.cpu_threads >= 1);
        assert!(info.os.contains(std::env::consts::OS));
        if cfg!(target_os = "linux") {
            assert!(info.memory.is_some_and(|m| m.total_bytes > 0));
        }
    }
}

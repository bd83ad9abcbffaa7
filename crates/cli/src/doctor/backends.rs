//! The compiled backends and whether CUDA can run: turns a [`CudaProbe`] into report lines
//! with what to install or set, and how to fall back to the CPU.

use super::{Check, Section, Status};
use crate::device::cuda_probe::{library_names, CudaProbe};
use crate::device::system::gib;

/// Whether this binary was built with `--features cuda`.
pub const CUDA_COMPILED: bool = cfg!(feature = "cuda");

const CPU_FALLBACK: &str =
    "to run on the CPU instead: --set device=Cpu (or device: Cpu in the experiment file)";

fn rebuild_hint() -> String {
    "this build has no CUDA: rebuild with `CUDARC_CUDA_VERSION=13000 cargo build --release --features cuda` \
     (no CUDA toolkit is needed to build; CUDA loads at run time)"
        .to_string()
}

fn driver_hint() -> String {
    if cfg!(windows) {
        "install the NVIDIA driver (nvcuda.dll comes with it); `nvidia-smi` should list the GPU"
            .into()
    } else {
        "install the NVIDIA driver (libcuda.so.1 comes with it; `nvidia-smi` should list the GPU); \
         in a container, run it with the GPU exposed (docker --gpus all); on WSL2 add /usr/lib/wsl/lib to LD_LIBRARY_PATH"
            .into()
    }
}

fn nvrtc_hint() -> String {
    if cfg!(windows) {
        "Burn compiles its GPU kernels at run time with NVRTC: install the CUDA toolkit (or its NVRTC \
         component) and put its bin folder (nvrtc64_130_0.dll) on PATH"
            .into()
    } else {
        "Burn compiles its GPU kernels at run time with NVRTC: install it (e.g. apt install cuda-nvrtc-13-0) \
         or add the folder holding libnvrtc.so.13 to LD_LIBRARY_PATH (a PyTorch install carries one under \
         site-packages/nvidia/cu13/lib or site-packages/nvidia/cuda_nvrtc/lib)"
            .into()
    }
}

/// The CUDA device indices the kernel check should run on: all the driver lists, when this
/// build has CUDA and both libraries load.
pub fn cuda_devices_to_test(probe: &CudaProbe) -> Vec<usize> {
    match (&probe.devices, CUDA_COMPILED && probe.usable()) {
        (Ok(devices), true) => devices.iter().map(|d| d.index).collect(),
        _ => Vec::new(),
    }
}

/// The backend lines, in fix order: what is compiled, driver, NVRTC, devices, the verdict.
/// `wanted_gpus`: the CUDA indices the experiment runs on (empty: the CPU).
pub fn checks(probe: &CudaProbe, wanted_gpus: &[usize]) -> Vec<Check> {
    let wanted_gpu = wanted_gpus.iter().copied().max();
    let mut checks = vec![Check::new(
        Section::Backends,
        "compiled backends",
        Status::Ok,
        match (CUDA_COMPILED, cfg!(feature = "wgpu")) {
            (true, true) => "Flex (CPU), CUDA, wgpu",
            (true, false) => "Flex (CPU), CUDA (wgpu not compiled in)",
            (false, true) => "Flex (CPU), wgpu (CUDA not compiled in)",
            (false, false) => "Flex (CPU) only (CUDA and wgpu not compiled in)",
        },
    )];
    // Missing CUDA pieces fail only when the experiment asks for a GPU.
    let missing = if wanted_gpu.is_some() {
        Status::Fail
    } else {
        Status::Info
    };

    let driver = &probe.driver_library;
    checks.push(match &driver.loaded {
        Some(name) => {
            let version = probe
                .driver_version
                .map_or(String::new(), |(major, minor)| {
                    format!(" (supports CUDA {major}.{minor})")
                });
            Check::new(
                Section::Backends,
                "CUDA driver library",
                Status::Ok,
                format!("{name}{version}"),
            )
        }
        None => Check::new(
            Section::Backends,
            "CUDA driver library",
            missing,
            format!("not found (tried {})", library_names("cuda").join(", ")),
        )
        .hint(driver_hint()),
    });

    let nvrtc = &probe.nvrtc_library;
    checks.push(match &nvrtc.loaded {
        Some(name) => {
            let version = probe.nvrtc_version.map_or(String::new(), |(major, minor)| {
                format!(" (NVRTC {major}.{minor})")
            });
            Check::new(
                Section::Backends,
                "NVRTC",
                Status::Ok,
                format!("{name}{version}"),
            )
        }
        None => {
            // No NVRTC next to a working driver is the classic half-installed CUDA.
            let status = if driver.loaded.is_some() {
                missing.max(Status::Warn)
            } else {
                missing
            };
            Check::new(
                Section::Backends,
                "NVRTC",
                status,
                format!("not found (tried {})", library_names("nvrtc").join(", ")),
            )
            .hint(nvrtc_hint())
        }
    });

    if driver.loaded.is_some() {
        checks.push(match &probe.devices {
            Ok(devices) if !devices.is_empty() => {
                let list: Vec<String> = devices
                    .iter()
                    .map(|d| {
                        let capability = d
                            .compute_capability
                            .map_or("compute capability unknown".into(), |(a, b)| {
                                format!("compute capability {a}.{b}")
                            });
                        format!(
                            "cuda:{} {}, {}, {capability}",
                            d.index,
                            d.name,
                            gib(d.total_memory_bytes)
                        )
                    })
                    .collect();
                Check::new(
                    Section::Backends,
                    "CUDA devices",
                    Status::Ok,
                    list.join("; "),
                )
            }
            Ok(_) => Check::new(
                Section::Backends,
                "CUDA devices",
                missing,
                "the driver lists no GPU",
            ),
            Err(e) => Check::new(
                Section::Backends,
                "CUDA devices",
                missing.max(Status::Warn),
                e.clone(),
            )
            .hint(driver_hint()),
        });
    }
    checks.push(verdict(probe, wanted_gpu));
    checks
}

/// One line that says whether CUDA will be used, and what to do if not.
fn verdict(probe: &CudaProbe, wanted_gpu: Option<usize>) -> Check {
    let device_count = probe.devices.as_ref().map_or(0, Vec::len);
    let failing = |detail: String| {
        let status = if wanted_gpu.is_some() {
            Status::Fail
        } else {
            Status::Info
        };
        Check::new(Section::Backends, "CUDA", status, detail)
    };
    match (CUDA_COMPILED, probe.usable()) {
        (true, true) => match wanted_gpu {
            Some(index) if index >= device_count => Check::new(
                Section::Backends,
                "CUDA",
                Status::Fail,
                format!("the experiment asks for Cuda({index}) but there are {device_count} device(s)"),
            )
            .hint(format!(
                "pick an index below {device_count} (--set 'device={{\"Cuda\":0}}'), or {CPU_FALLBACK}"
            )),
            _ => Check::new(Section::Backends, "CUDA", Status::Ok, format!("available: {device_count} device(s)")),
        },
        (false, true) => {
            let status = if wanted_gpu.is_some() { Status::Fail } else { Status::Warn };
            Check::new(
                Section::Backends,
                "CUDA",
                status,
                format!("unavailable in this build, although {device_count} GPU(s) and NVRTC are present"),
            )
            .hint(rebuild_hint())
        }
        (false, false) => failing("unavailable (not compiled in, and no usable CUDA driver + NVRTC here); everything runs on the CPU".into())
            .hint(format!("{}; {CPU_FALLBACK}", rebuild_hint())),
        (true, false) => failing("unavailable: the CUDA libraries did not load (see above); everything runs on the CPU".into())
            .hint(CPU_FALLBACK),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda_probe::{CudaDeviceInfo, LibraryProbe};

    fn library(loaded: bool) -> LibraryProbe {
        LibraryProbe {
            loaded: loaded.then(|| "lib.so".to_string()),
            tried: vec![],
            error: None,
        }
    }

    fn probe(driver: bool, nvrtc: bool, gpus: usize) -> CudaProbe {
        CudaProbe {
            driver_library: library(driver),
            nvrtc_library: library(nvrtc),
            driver_version: driver.then_some((13, 0)),
            nvrtc_version: nvrtc.then_some((13, 0)),
            devices: if driver {
                Ok((0..gpus)
                    .map(|index| CudaDeviceInfo {
                        index,
                        name: "NVIDIA H200".into(),
                        total_memory_bytes: 150 << 30,
                        compute_capability: Some((9, 0)),
                    })
                    .collect())
            } else {
                Err("the driver library did not load".into())
            },
        }
    }

    fn worst(checks: &[Check]) -> Status {
        checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok)
    }

    #[test]
    fn no_cuda_on_a_cpu_machine_is_information_only() {
        let lines = checks(&probe(false, false, 0), &[]);
        assert_eq!(worst(&lines), Status::Info);
        let cuda = lines.iter().find(|c| c.name == "CUDA").unwrap();
        assert!(cuda.detail.starts_with("unavailable"));
        assert!(cuda.hint.as_deref().unwrap().contains("--set device=Cpu"));
    }

    #[test]
    fn an_experiment_that_wants_a_gpu_fails_without_one() {
        let lines = checks(&probe(false, false, 0), &[0]);
        assert_eq!(worst(&lines), Status::Fail);
        let lines = checks(&probe(true, false, 1), &[0]);
        let nvrtc = lines.iter().find(|c| c.name == "NVRTC").unwrap();
        assert_eq!(nvrtc.status, Status::Fail);
        assert!(nvrtc.hint.as_deref().unwrap().contains("NVRTC"));
    }

    #[test]
    fn a_driver_without_nvrtc_is_a_warning_and_devices_are_listed() {
        let lines = checks(&probe(true, false, 2), &[]);
        assert_eq!(
            lines.iter().find(|c| c.name == "NVRTC").unwrap().status,
            Status::Warn
        );
        let devices = lines.iter().find(|c| c.name == "CUDA devices").unwrap();
        assert!(devices
            .detail
            .contains("cuda:1 NVIDIA H200, 150.0 GiB, compute capability 9.0"));
    }

    #[test]
    fn a_working_gpu_is_tested_only_in_a_cuda_build() {
        let full = probe(true, true, 2);
        let expected: Vec<usize> = if CUDA_COMPILED { vec![0, 1] } else { vec![] };
        assert_eq!(cuda_devices_to_test(&full), expected);
        let verdict = checks(&full, &[5]).pop().unwrap();
        assert_eq!(verdict.status, Status::Fail);
        let verdict = checks(&full, &[]).pop().unwrap();
        let want = if CUDA_COMPILED {
            Status::Ok
        } else {
            Status::Warn
        };
        assert_eq!(verdict.status, want);
    }
}

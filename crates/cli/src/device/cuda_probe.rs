//! Whether CUDA can load, asked of the libraries themselves: the driver library (libcuda) and
//! NVRTC, opened by the same file names cudarc tries, then a few driver calls (version, device
//! count, name, memory, compute capability). This works in every build, so a CPU-only binary
//! can still say "there is a GPU here: rebuild with `--features cuda`".

use std::ffi::{c_char, c_int, c_uint, CStr};

use libloading::Library;
use serde::Serialize;

/// One shared library: which name opened, or every name tried.
#[derive(Debug, Clone, Serialize)]
pub struct LibraryProbe {
    pub loaded: Option<String>,
    pub tried: Vec<String>,
    /// The loader's message for the last name tried (when nothing loaded).
    pub error: Option<String>,
}

/// One GPU as the driver describes it.
#[derive(Debug, Clone, Serialize)]
pub struct CudaDeviceInfo {
    pub index: usize,
    pub name: String,
    pub total_memory_bytes: u64,
    /// `(major, minor)`, e.g. (9, 0) for an H100/H200.
    pub compute_capability: Option<(i32, i32)>,
}

/// What loading CUDA found.
#[derive(Debug, Clone, Serialize)]
pub struct CudaProbe {
    pub driver_library: LibraryProbe,
    pub nvrtc_library: LibraryProbe,
    /// e.g. (13, 0): the newest CUDA the driver supports.
    pub driver_version: Option<(i32, i32)>,
    pub nvrtc_version: Option<(i32, i32)>,
    /// The devices, or the driver's error (e.g. `CUDA_ERROR_NO_DEVICE`).
    pub devices: Result<Vec<CudaDeviceInfo>, String>,
}

impl CudaProbe {
    /// Both libraries load and the driver lists at least one device.
    pub fn usable(&self) -> bool {
        self.driver_library.loaded.is_some()
            && self.nvrtc_library.loaded.is_some()
            && self.devices.as_ref().is_ok_and(|d| !d.is_empty())
    }
}

/// The file names cudarc 0.19 tries (`get_lib_name_candidates`), most specific first.
pub fn library_names(lib: &str) -> Vec<String> {
    if cfg!(windows) {
        match lib {
            "cuda" => vec!["nvcuda.dll".into()],
            _ => ["130_0", "13", "120_0", "12", "112_0"]
                .iter()
                .map(|v| format!("{lib}64_{v}.dll"))
                .chain(std::iter::once(format!("{lib}.dll")))
                .collect(),
        }
    } else {
        let base = format!("lib{lib}{}", std::env::consts::DLL_SUFFIX);
        ["", ".1", ".13", ".12", ".11"]
            .iter()
            .map(|suffix| format!("{base}{suffix}"))
            .collect()
    }
}

fn open_first(names: Vec<String>) -> (Option<Library>, LibraryProbe) {
    let mut error = None;
    for name in &names {
        // SAFETY: loading a shared library runs its initialisers. libcuda and libnvrtc are
        // the vendor's libraries that cudarc would load in this process anyway.
        match unsafe { Library::new(name.as_str()) } {
            Ok(library) => {
                let probe = LibraryProbe {
                    loaded: Some(name.clone()),
                    tried: names.clone(),
                    error: None,
                };
                return (Some(library), probe);
            }
            Err(e) => error = Some(e.to_string()),
        }
    }
    (
        None,
        LibraryProbe {
            loaded: None,
            tried: names,
            error,
        },
    )
}

type CuResult = c_int;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// Names of the driver errors a user is likely to meet.
fn cu_error_name(code: CuResult) -> String {
    let name = match code {
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        34 => "CUDA_ERROR_STUB_LIBRARY (this libcuda is the toolkit's link stub, not the driver)",
        35 => "CUDA_ERROR_INSUFFICIENT_DRIVER (the driver is older than the CUDA runtime)",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        304 => "CUDA_ERROR_OPERATING_SYSTEM",
        803 => "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        804 => "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => "",
    };
    if name.is_empty() {
        format!("CUresult {code}")
    } else {
        format!("{name} ({code})")
    }
}

/// Resolves `name` in `library` as the function type `T`.
///
/// # Safety
/// `T` must be the C signature of `name`.
unsafe fn symbol<T: Copy>(library: &Library, name: &str) -> Result<T, String> {
    library
        .get::<T>(name)
        .map(|s| *s)
        .map_err(|e| format!("{name} not found: {e}"))
}

/// The driver's version and its devices (or the driver's error).
type DriverAnswer = (Option<(i32, i32)>, Result<Vec<CudaDeviceInfo>, String>);

fn query_driver(library: &Library) -> DriverAnswer {
    type Init = unsafe extern "C" fn(c_uint) -> CuResult;
    type OutInt = unsafe extern "C" fn(*mut c_int) -> CuResult;
    type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> CuResult;
    type Name = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult;
    type TotalMem = unsafe extern "C" fn(*mut usize, c_int) -> CuResult;
    type Attribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuResult;

    // SAFETY: the signatures are those of the CUDA driver API (cuda.h), stable since CUDA 3.2
    // (`cuDeviceTotalMem_v2`); every out-pointer points at a live local of the right type.
    unsafe {
        let version = symbol::<OutInt>(library, "cuDriverGetVersion")
            .ok()
            .and_then(|f| {
                let mut v = 0;
                (f(&mut v) == 0).then_some((v / 1000, (v % 1000) / 10))
            });
        let devices = (|| {
            let init = symbol::<Init>(library, "cuInit")?;
            let count = symbol::<OutInt>(library, "cuDeviceGetCount")?;
            let get = symbol::<DeviceGet>(library, "cuDeviceGet")?;
            let name = symbol::<Name>(library, "cuDeviceGetName")?;
            let total = symbol::<TotalMem>(library, "cuDeviceTotalMem_v2")?;
            let attribute = symbol::<Attribute>(library, "cuDeviceGetAttribute")?;
            let check = |what: &str, code: CuResult| match code {
                0 => Ok(()),
                code => Err(format!("{what} failed: {}", cu_error_name(code))),
            };
            check("cuInit", init(0))?;
            let mut n = 0;
            check("cuDeviceGetCount", count(&mut n))?;
            let mut out = Vec::new();
            for index in 0..n.max(0) {
                let mut device = 0;
                check("cuDeviceGet", get(&mut device, index))?;
                let mut buffer = [0 as c_char; 256];
                check("cuDeviceGetName", name(buffer.as_mut_ptr(), 255, device))?;
                let mut bytes = 0usize;
                check("cuDeviceTotalMem", total(&mut bytes, device))?;
                let (mut major, mut minor) = (0, 0);
                let capability = (attribute(
                    &mut major,
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    device,
                ) == 0
                    && attribute(
                        &mut minor,
                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                        device,
                    ) == 0)
                    .then_some((major, minor));
                out.push(CudaDeviceInfo {
                    index: index as usize,
                    name: CStr::from_ptr(buffer.as_ptr())
                        .to_string_lossy()
                        .into_owned(),
                    total_memory_bytes: bytes as u64,
                    compute_capability: capability,
                });
            }
            Ok(out)
        })();
        (version, devices)
    }
}

fn query_nvrtc(library: &Library) -> Option<(i32, i32)> {
    type Version = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
    // SAFETY: `nvrtcVersion(int*, int*)` from nvrtc.h; both pointers are live locals.
    unsafe {
        let f = symbol::<Version>(library, "nvrtcVersion").ok()?;
        let (mut major, mut minor) = (0, 0);
        (f(&mut major, &mut minor) == 0).then_some((major, minor))
    }
}

/// Opens the libraries and asks the driver about its devices. Never panics; takes well under
/// a second (cuInit is the slow part on a machine with GPUs).
pub fn probe_cuda() -> CudaProbe {
    let (driver, driver_library) = open_first(library_names("cuda"));
    let (nvrtc, nvrtc_library) = open_first(library_names("nvrtc"));
    let (driver_version, devices) = match &driver {
        Some(library) => query_driver(library),
        None => (None, Err("the driver library did not load".to_string())),
    };
    CudaProbe {
        driver_library,
        nvrtc_library,
        driver_version,
        nvrtc_version: nvrtc.as_ref().and_then(query_nvrtc),
        devices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_platform_convention() {
        let names = library_names("nvrtc");
        if cfg!(target_os = "linux") {
            assert_eq!(names[0], "libnvrtc.so");
            assert!(names.contains(&"libnvrtc.so.13".to_string()));
            assert!(library_names("cuda").contains(&"libcuda.so.1".to_string()));
        }
        assert!(!names.is_empty());
    }

    #[test]
    fn probing_never_panics_and_is_consistent() {
        let probe = probe_cuda();
        if probe.driver_library.loaded.is_none() {
            assert!(probe.devices.is_err());
            assert!(!probe.usable());
            assert_eq!(probe.driver_library.tried, library_names("cuda"));
        }
        assert_eq!(cu_error_name(100), "CUDA_ERROR_NO_DEVICE (100)");
        assert_eq!(cu_error_name(12345), "CUresult 12345");
    }
}

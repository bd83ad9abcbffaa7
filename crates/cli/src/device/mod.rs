//! The one place that turns a [`DeviceConfig`] into a Burn backend and its devices: Flex on the
//! CPU, Burn's CUDA backend on NVIDIA GPUs (builds with `--features cuda`, after checking that
//! CUDA loads here), Burn's wgpu backend on any Vulkan / DirectX 12 / Metal GPU (builds with
//! `--features wgpu`, after checking the adapter exists). A command states what it runs as a [`BackendJob`], generic over the backend;
//! [`dispatch`] picks the backend and runs it. Training wraps the backend it is given in
//! `Autodiff` itself, so training and inference go through the same dispatcher.
//!
//! What the dispatcher, `doctor` and `bench` know about the machine lives here too, below the
//! commands that report it: [`cuda_probe`] (whether CUDA loads, asked before Burn touches it),
//! [`wgpu_probe`] (the adapters wgpu sees), [`guard`] (backend work that may panic, turned into
//! an error) and [`system`] (the operating system, cores and memory).

mod config;
pub mod cuda_probe;
pub mod guard;
pub mod system;
pub mod wgpu_probe;

use burn::backend::Flex;
use burn::tensor::backend::Backend;
pub use config::{DeviceConfig, DeviceIds, SingleDevice};

/// Work that runs on whichever backend the experiment's device asks for, giving a `T`.
pub trait BackendJob<T> {
    /// Runs on backend `B` with one device per replica (one for single-device commands,
    /// [`only`] takes it).
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<T>;
}

/// Why a GPU device cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// This binary was built without `--features cuda`.
    NotBuilt,
    /// CUDA does not load here, or lists no device; `reason` says which part is missing.
    Unusable { ids: Vec<usize>, reason: String },
    /// Device `index` was asked for, but the driver lists `available` devices.
    Missing { index: usize, available: usize },
    /// This binary was built without `--features wgpu`.
    WgpuNotBuilt,
    /// Adapter `index` was asked for; `adapters` are the ones wgpu lists ("0: name (kind)").
    WgpuMissing { index: usize, adapters: Vec<String> },
    /// Adapter `index` is of a kind Burn's wgpu backend cannot select.
    WgpuUnsupported { index: usize, adapter: String },
}

impl Unavailable {
    /// The message for a command whose CPU fallback is `cpu_instead`.
    pub fn message(&self, cpu_instead: &str) -> String {
        match self {
            Unavailable::NotBuilt => format!(
                "the experiment asks for device Cuda, but this build has no CUDA support; rebuild \
                 with `cargo build --release --features cuda`, or {cpu_instead}"
            ),
            Unavailable::Unusable { ids, reason } => format!(
                "device Cuda{ids:?} was asked for, but CUDA is not usable here: {reason}. Run \
                 `doctor` for details, or {cpu_instead}"
            ),
            Unavailable::Missing { index, available } => format!(
                "device Cuda({index}) was asked for, but this machine has {available} CUDA \
                 device(s) (indices 0..{available})"
            ),
            Unavailable::WgpuNotBuilt => format!(
                "the experiment asks for device Wgpu, but this build has no wgpu support; rebuild \
                 with `cargo build --release --features wgpu`, or {cpu_instead}"
            ),
            Unavailable::WgpuMissing { index, adapters } if adapters.is_empty() => format!(
                "device Wgpu({index}) was asked for, but wgpu finds no Vulkan/Metal adapter here: \
                 install the GPU's driver (on Linux without a GPU, Mesa's software Vulkan: \
                 `apt install mesa-vulkan-drivers libvulkan1`), or {cpu_instead}"
            ),
            Unavailable::WgpuMissing { index, adapters } => format!(
                "device Wgpu({index}) was asked for, but wgpu lists {} adapter(s): {}",
                adapters.len(),
                adapters.join(", ")
            ),
            Unavailable::WgpuUnsupported { index, adapter } => format!(
                "device Wgpu({index}) is {adapter}, an adapter Burn's wgpu backend cannot \
                 select; pick another index (`doctor` lists them), or {cpu_instead}"
            ),
        }
    }
}

/// Runs `job` on the backend and devices of `device`. When CUDA cannot be used the error ends
/// with what the user can do instead, `cpu_instead`: "train on the CPU with --set device=Cpu".
pub fn dispatch<T>(
    device: &DeviceConfig,
    cpu_instead: &str,
    job: impl BackendJob<T>,
) -> anyhow::Result<T> {
    try_dispatch(device, job).unwrap_or_else(|why| Err(anyhow::anyhow!(why.message(cpu_instead))))
}

/// Like [`dispatch`], but says why CUDA cannot be used as a value, for a caller that words it
/// in its own arguments (`bench --device`).
pub fn try_dispatch<T>(
    device: &DeviceConfig,
    job: impl BackendJob<T>,
) -> Result<anyhow::Result<T>, Unavailable> {
    match device {
        DeviceConfig::Cpu => Ok(job.run::<Flex>(vec![Default::default()])),
        DeviceConfig::CpuReplicas(n) => Ok(job.run::<Flex>(vec![Default::default(); *n])),
        DeviceConfig::Cuda(ids) => on_cuda(&ids.to_vec(), job),
        DeviceConfig::Wgpu(ids) => on_wgpu(&ids.to_vec(), job),
    }
}

/// The one device of a single-device job (the dispatcher always gives it one).
pub fn only<D>(devices: Vec<D>) -> D {
    devices
        .into_iter()
        .next()
        .expect("the dispatcher gives a single-device job one device")
}

#[cfg(feature = "cuda")]
fn on_cuda<T>(ids: &[usize], job: impl BackendJob<T>) -> Result<anyhow::Result<T>, Unavailable> {
    use burn::backend::cuda::CudaDevice;
    use burn::backend::Cuda;
    // Check before Burn touches CUDA: a missing driver or NVRTC panics deep inside cubecl.
    check_cuda(&cuda_probe::probe_cuda(), ids)?;
    let devices = ids.iter().map(|&i| CudaDevice::new(i)).collect();
    Ok(job.run::<Cuda>(devices))
}

#[cfg(not(feature = "cuda"))]
fn on_cuda<T>(_: &[usize], _: impl BackendJob<T>) -> Result<anyhow::Result<T>, Unavailable> {
    Err(Unavailable::NotBuilt)
}

#[cfg(feature = "wgpu")]
fn on_wgpu<T>(ids: &[usize], job: impl BackendJob<T>) -> Result<anyhow::Result<T>, Unavailable> {
    let devices = wgpu_devices(&wgpu_probe::probe_wgpu(), ids)?;
    Ok(job.run::<burn::backend::Wgpu>(devices))
}

#[cfg(not(feature = "wgpu"))]
fn on_wgpu<T>(_: &[usize], _: impl BackendJob<T>) -> Result<anyhow::Result<T>, Unavailable> {
    Err(Unavailable::WgpuNotBuilt)
}

/// Burn's devices for adapters `ids` of `adapters`, or why one cannot be used.
#[cfg(feature = "wgpu")]
fn wgpu_devices(
    adapters: &[wgpu_probe::WgpuAdapter],
    ids: &[usize],
) -> Result<Vec<burn::backend::wgpu::WgpuDevice>, Unavailable> {
    let described = |a: &wgpu_probe::WgpuAdapter| format!("{}: {} ({})", a.index, a.name, a.kind);
    ids.iter()
        .map(|&index| match adapters.get(index) {
            None => Err(Unavailable::WgpuMissing {
                index,
                adapters: adapters.iter().map(described).collect(),
            }),
            Some(adapter) => wgpu_probe::wgpu_device(adapters, index).ok_or_else(|| {
                Unavailable::WgpuUnsupported {
                    index,
                    adapter: described(adapter),
                }
            }),
        })
        .collect()
}

/// Whether the probed CUDA can run on devices `ids`.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn check_cuda(probe: &cuda_probe::CudaProbe, ids: &[usize]) -> Result<(), Unavailable> {
    if !probe.usable() {
        let reason = match (
            &probe.driver_library.loaded,
            &probe.nvrtc_library.loaded,
            &probe.devices,
        ) {
            (None, _, _) => "the CUDA driver library (libcuda) does not load".to_string(),
            (_, None, _) => "NVRTC (libnvrtc, part of the CUDA toolkit) does not load".to_string(),
            (_, _, Err(e)) => format!("the driver lists no device ({e})"),
            _ => "the driver lists no device".to_string(),
        };
        let ids = ids.to_vec();
        return Err(Unavailable::Unusable { ids, reason });
    }
    let available = probe.devices.as_ref().map_or(0, |d| d.len());
    match ids.iter().find(|&&i| i >= available) {
        Some(&index) => Err(Unavailable::Missing { index, available }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod dispatch_tests;

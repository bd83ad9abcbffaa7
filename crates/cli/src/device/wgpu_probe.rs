//! The GPUs Burn's wgpu backend can use here: the adapters of the graphics API it picks
//! (Vulkan on Linux and Windows, Metal on macOS), in the order `Wgpu(i)` indexes them, and the
//! Burn device of each. Asked before Burn touches wgpu, so that a wrong index or a machine
//! without a Vulkan driver is an error that says so instead of a panic inside cubecl.

use serde::Serialize;

/// One adapter, as `doctor` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WgpuAdapter {
    /// The `i` of `Wgpu(i)`.
    pub index: usize,
    pub name: String,
    /// The driver's name and version ("llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA 580.65").
    pub driver: String,
    /// "Vulkan", "Metal", "Dx12".
    pub api: String,
    /// "DiscreteGpu", "IntegratedGpu", "VirtualGpu", "Cpu" (a software rasteriser such as
    /// Mesa's lavapipe: it works, but it is not a GPU), "Other".
    pub kind: String,
    /// The adapter offers 16-bit float shaders (`shader-f16`): `F16` training can run on it.
    pub shader_f16: bool,
    /// The largest buffer it allows, in bytes (wgpu does not report the memory size).
    pub max_buffer_bytes: u64,
}

impl WgpuAdapter {
    /// A software adapter: it runs on the CPU, not on a GPU.
    pub fn software(&self) -> bool {
        self.kind == "Cpu"
    }
}

#[cfg(feature = "wgpu")]
mod probe {
    use super::WgpuAdapter;
    use burn::backend::wgpu::graphics::{AutoGraphicsApi, GraphicsApi};
    use burn::backend::wgpu::WgpuDevice;

    fn adapters() -> Vec<wgpu::Adapter> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::all(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let backend = AutoGraphicsApi::backend();
        ready(instance.enumerate_adapters(backend.into()))
    }

    /// The value of a future that native wgpu resolves at once (adapter enumeration).
    fn ready<F: std::future::Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut context) {
                return value;
            }
            std::thread::yield_now();
        }
    }

    /// The adapters Burn's wgpu backend can use, in `Wgpu(i)` order.
    pub fn probe_wgpu() -> Vec<WgpuAdapter> {
        adapters()
            .iter()
            .enumerate()
            .map(|(index, adapter)| {
                let info = adapter.get_info();
                let driver = [info.driver.as_str(), info.driver_info.as_str()]
                    .into_iter()
                    .filter(|part| !part.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                WgpuAdapter {
                    index,
                    name: info.name,
                    driver,
                    api: format!("{:?}", info.backend),
                    kind: format!("{:?}", info.device_type),
                    shader_f16: adapter.features().contains(wgpu::Features::SHADER_F16),
                    max_buffer_bytes: adapter.limits().max_buffer_size,
                }
            })
            .collect()
    }

    /// Burn's device for adapter `index` of [`probe_wgpu`]: cubecl numbers the adapters of
    /// each kind separately (`DiscreteGpu(0)`, `IntegratedGpu(0)`, …) and has one `Cpu`.
    pub fn wgpu_device(adapters: &[WgpuAdapter], index: usize) -> Option<WgpuDevice> {
        let adapter = adapters.get(index)?;
        let same_kind_before = adapters[..index]
            .iter()
            .filter(|a| a.kind == adapter.kind)
            .count();
        match adapter.kind.as_str() {
            "DiscreteGpu" => Some(WgpuDevice::DiscreteGpu(same_kind_before)),
            "IntegratedGpu" => Some(WgpuDevice::IntegratedGpu(same_kind_before)),
            "VirtualGpu" => Some(WgpuDevice::VirtualGpu(same_kind_before)),
            "Cpu" if same_kind_before == 0 => Some(WgpuDevice::Cpu),
            _ => None,
        }
    }
}

#[cfg(feature = "wgpu")]
pub use probe::{probe_wgpu, wgpu_device};

/// Without the `wgpu` feature there is nothing to list.
#[cfg(not(feature = "wgpu"))]
pub fn probe_wgpu() -> Vec<WgpuAdapter> {
    Vec::new()
}

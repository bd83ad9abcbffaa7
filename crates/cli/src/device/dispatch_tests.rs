use burn::tensor::backend::Backend;

use super::cuda_probe::{CudaDeviceInfo, CudaProbe, LibraryProbe};
use super::*;

/// Says how many devices it was given and on which backend.
struct Count;

const CPU_INSTEAD: &str = "count on the CPU with --set device=Cpu";

impl BackendJob<(usize, String)> for Count {
    fn run<B: Backend>(self, devices: Vec<B::Device>) -> anyhow::Result<(usize, String)> {
        Ok((devices.len(), B::name(&devices[0])))
    }
}

#[test]
fn the_cpu_gets_one_device_per_replica() {
    let (one, name) = dispatch(&DeviceConfig::Cpu, CPU_INSTEAD, Count).unwrap();
    assert_eq!(one, 1);
    assert!(name.to_lowercase().contains("flex"), "{name}");
    assert_eq!(
        dispatch(&DeviceConfig::CpuReplicas(3), CPU_INSTEAD, Count)
            .unwrap()
            .0,
        3
    );
    assert_eq!(only(vec![7]), 7);
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_without_the_feature_says_how_to_rebuild() {
    let error = dispatch(&DeviceConfig::cuda(0), CPU_INSTEAD, Count)
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "the experiment asks for device Cuda, but this build has no CUDA support; rebuild with \
         `cargo build --release --features cuda`, or count on the CPU with --set device=Cpu"
    );
    assert_eq!(
        try_dispatch(&DeviceConfig::cuda(0), Count).unwrap_err(),
        Unavailable::NotBuilt
    );
}

fn library(loaded: bool) -> LibraryProbe {
    LibraryProbe {
        loaded: loaded.then(|| "libcuda.so.1".to_string()),
        tried: vec!["libcuda.so.1".into()],
        error: None,
    }
}

fn probe(driver: bool, devices: usize) -> CudaProbe {
    let info = |index| CudaDeviceInfo {
        index,
        name: "GPU".into(),
        total_memory_bytes: 1 << 30,
        compute_capability: Some((9, 0)),
    };
    CudaProbe {
        driver_library: library(driver),
        nvrtc_library: library(true),
        driver_version: None,
        nvrtc_version: None,
        devices: Ok((0..devices).map(info).collect()),
    }
}

#[test]
fn the_probe_names_what_is_missing() {
    let unusable = check_cuda(&probe(false, 0), &[0, 1]).unwrap_err();
    assert_eq!(
        unusable.message("train on the CPU with --set device=Cpu"),
        "device Cuda[0, 1] was asked for, but CUDA is not usable here: the CUDA driver library \
         (libcuda) does not load. Run `doctor` for details, or train on the CPU with --set \
         device=Cpu"
    );
    let missing = check_cuda(&probe(true, 2), &[1, 2]).unwrap_err();
    assert_eq!(
        missing,
        Unavailable::Missing {
            index: 2,
            available: 2
        }
    );
    assert_eq!(
        missing.message(""),
        "device Cuda(2) was asked for, but this machine has 2 CUDA device(s) (indices 0..2)"
    );
    assert_eq!(check_cuda(&probe(true, 2), &[0, 1]), Ok(()));
}

#[cfg(not(feature = "wgpu"))]
#[test]
fn wgpu_without_the_feature_says_how_to_rebuild() {
    let error = dispatch(&DeviceConfig::Wgpu(DeviceIds::One(0)), CPU_INSTEAD, Count)
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "the experiment asks for device Wgpu, but this build has no wgpu support; rebuild with \
         `cargo build --release --features wgpu`, or count on the CPU with --set device=Cpu"
    );
}

#[cfg(feature = "wgpu")]
#[test]
fn a_wgpu_index_past_the_adapters_names_them() {
    use super::wgpu_probe::WgpuAdapter;
    let adapter = |index, kind: &str| WgpuAdapter {
        index,
        name: format!("gpu {index}"),
        driver: String::new(),
        api: "Vulkan".into(),
        kind: kind.into(),
        shader_f16: false,
        max_buffer_bytes: 0,
    };
    let adapters = [
        adapter(0, "DiscreteGpu"),
        adapter(1, "Cpu"),
        adapter(2, "DiscreteGpu"),
    ];
    let devices = wgpu_devices(&adapters, &[2, 1, 0]).unwrap();
    use burn::backend::wgpu::WgpuDevice;
    assert_eq!(
        devices,
        [
            WgpuDevice::DiscreteGpu(1),
            WgpuDevice::Cpu,
            WgpuDevice::DiscreteGpu(0)
        ]
    );
    let missing = wgpu_devices(&adapters, &[3]).unwrap_err();
    assert_eq!(
        missing.message(CPU_INSTEAD),
        "device Wgpu(3) was asked for, but wgpu lists 3 adapter(s): 0: gpu 0 (DiscreteGpu), \
         1: gpu 1 (Cpu), 2: gpu 2 (DiscreteGpu)"
    );
    let none = wgpu_devices(&[], &[0]).unwrap_err().message(CPU_INSTEAD);
    assert!(none.contains("no Vulkan/Metal adapter"), "{none}");
    let other = wgpu_devices(&[adapter(0, "Other")], &[0]).unwrap_err();
    assert!(
        matches!(other, Unavailable::WgpuUnsupported { index: 0, .. }),
        "{other:?}"
    );
}

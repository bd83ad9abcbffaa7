//! Where the computation runs: the `device` field of an experiment file.

use serde::{Deserialize, Serialize};

/// Where the computation runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum DeviceConfig {
    /// The CPU (Burn's Flex backend), all cores.
    #[default]
    Cpu,
    /// Data-parallel replicas on the CPU (one thread each; for tests and experiments).
    CpuReplicas(usize),
    /// CUDA GPUs by index: `Cuda(0)`, or `Cuda([0, 1, 2, 3])` for data-parallel training
    /// (needs a build with `--features cuda`).
    Cuda(DeviceIds),
    /// GPUs through Burn's wgpu backend (Vulkan, DirectX 12, Metal), by the index `doctor`
    /// lists them under: `Wgpu(0)`, or `Wgpu([0, 1])` for data-parallel training (needs a
    /// build with `--features wgpu`; no CUDA toolkit, only the GPU's driver).
    Wgpu(DeviceIds),
}

/// One device index or several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeviceIds {
    One(usize),
    Many(Vec<usize>),
}

impl DeviceIds {
    pub fn to_vec(&self) -> Vec<usize> {
        match self {
            DeviceIds::One(i) => vec![*i],
            DeviceIds::Many(v) => v.clone(),
        }
    }

    /// The first index (an empty list means device 0).
    pub fn first(&self) -> usize {
        self.to_vec().first().copied().unwrap_or(0)
    }
}

/// One device, for the commands that use a single one (eval, predict, bench, doctor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SingleDevice {
    Cpu,
    Cuda(usize),
    Wgpu(usize),
}

impl DeviceConfig {
    /// One CUDA device.
    pub fn cuda(index: usize) -> Self {
        DeviceConfig::Cuda(DeviceIds::One(index))
    }

    /// The first device (replica 0 of a data-parallel configuration).
    pub fn single(&self) -> SingleDevice {
        match self {
            DeviceConfig::Cpu | DeviceConfig::CpuReplicas(_) => SingleDevice::Cpu,
            DeviceConfig::Cuda(ids) => SingleDevice::Cuda(ids.first()),
            DeviceConfig::Wgpu(ids) => SingleDevice::Wgpu(ids.first()),
        }
    }

    /// Whether training goes through the data-parallel path (worker threads and all-reduce)
    /// even with one device: `CpuReplicas(1)` and `Cuda([0])` do, `Cpu` and `Cuda(0)` do not.
    pub fn replicated(&self) -> bool {
        matches!(
            self,
            DeviceConfig::CpuReplicas(_)
                | DeviceConfig::Cuda(DeviceIds::Many(_))
                | DeviceConfig::Wgpu(DeviceIds::Many(_))
        )
    }

    /// How many devices (replicas) train.
    pub fn count(&self) -> usize {
        match self {
            DeviceConfig::Cpu => 1,
            DeviceConfig::CpuReplicas(n) => *n,
            DeviceConfig::Cuda(ids) | DeviceConfig::Wgpu(ids) => ids.to_vec().len(),
        }
    }
}

impl From<SingleDevice> for DeviceConfig {
    fn from(device: SingleDevice) -> Self {
        match device {
            SingleDevice::Cpu => DeviceConfig::Cpu,
            SingleDevice::Cuda(index) => DeviceConfig::cuda(index),
            SingleDevice::Wgpu(index) => DeviceConfig::Wgpu(DeviceIds::One(index)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_accept_one_index_or_a_list() {
        let one: DeviceConfig = ron::de::from_str("Cuda(0)").unwrap();
        assert_eq!(one, DeviceConfig::Cuda(DeviceIds::One(0)));
        let many: DeviceConfig = ron::de::from_str("Cuda([0, 1, 2, 3])").unwrap();
        assert_eq!(many.count(), 4);
        let cpus: DeviceConfig = ron::de::from_str("CpuReplicas(2)").unwrap();
        assert_eq!(cpus.count(), 2);
        assert!(cpus.replicated() && many.replicated());
        let listed: DeviceConfig = ron::de::from_str("Cuda([0])").unwrap();
        assert!(listed.replicated() && !one.replicated() && !DeviceConfig::Cpu.replicated());
        assert_eq!(
            DeviceConfig::from(SingleDevice::Cuda(1)),
            DeviceConfig::cuda(1)
        );
        assert_eq!(many.single(), SingleDevice::Cuda(0));
        let gpus: DeviceConfig = ron::de::from_str("Wgpu([1, 0])").unwrap();
        assert_eq!((gpus.count(), gpus.single()), (2, SingleDevice::Wgpu(1)));
        assert!(gpus.replicated());
        let gpu: DeviceConfig = ron::de::from_str("Wgpu(0)").unwrap();
        assert!(!gpu.replicated());
        assert_eq!(DeviceConfig::from(gpu.single()), gpu);
    }
}

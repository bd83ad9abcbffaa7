//! The wgpu lines: the Vulkan / DirectX 12 / Metal adapters Burn's wgpu backend can use (name,
//! driver, software or hardware, f16 shaders, largest buffer), and which one the experiment's
//! device would use and why.

use super::{Check, Section, Status};
use crate::device::system::gib;
use crate::device::wgpu_probe::WgpuAdapter;

/// Whether this binary was built with `--features wgpu`.
pub const WGPU_COMPILED: bool = cfg!(feature = "wgpu");

fn driver_hint() -> &'static str {
    if cfg!(target_os = "macos") {
        "Metal comes with macOS 10.13 and later; a Mac without it cannot run the wgpu backend"
    } else if cfg!(windows) {
        "install the GPU vendor's current driver (NVIDIA, AMD or Intel): it brings the Vulkan driver"
    } else {
        "install the GPU's Vulkan driver (Debian/Ubuntu: mesa-vulkan-drivers for AMD and Intel, the \
         NVIDIA driver for NVIDIA; without a GPU, Mesa's software Vulkan `lavapipe` is in \
         mesa-vulkan-drivers), and libvulkan1"
    }
}

/// One adapter's description.
fn describe(adapter: &WgpuAdapter) -> String {
    let kind = if adapter.software() {
        "software (runs on the CPU, not a GPU)".to_string()
    } else {
        adapter.kind.clone()
    };
    format!(
        "{}, {}, {kind}, driver {}, f16 shaders {}, largest buffer {}",
        adapter.name,
        adapter.api,
        if adapter.driver.is_empty() {
            "unknown"
        } else {
            &adapter.driver
        },
        if adapter.shader_f16 { "yes" } else { "no" },
        gib(adapter.max_buffer_bytes),
    )
}

/// The lines for `adapters` when the experiment runs on wgpu adapters `wanted` (empty: it does
/// not use wgpu, and a missing adapter is only worth knowing).
pub fn checks(adapters: &[WgpuAdapter], wanted: &[usize]) -> Vec<Check> {
    let missing = if wanted.is_empty() {
        Status::Info
    } else {
        Status::Fail
    };
    if !WGPU_COMPILED {
        return vec![Check::new(Section::Backends, "wgpu", missing, "not compiled in")
            .hint("rebuild with `cargo build --release --features wgpu` to train on any Vulkan / DirectX 12 / Metal GPU")];
    }
    if adapters.is_empty() {
        return vec![Check::new(
            Section::Backends,
            "wgpu adapters",
            missing,
            "none: no Vulkan / Metal driver answers",
        )
        .hint(driver_hint())];
    }
    let mut checks: Vec<Check> = adapters
        .iter()
        .map(|a| {
            let status = if a.software() {
                Status::Info
            } else {
                Status::Ok
            };
            Check::new(
                Section::Backends,
                format!("wgpu:{}", a.index),
                status,
                describe(a),
            )
        })
        .collect();
    checks.push(choice(adapters, wanted));
    checks
}

/// Which adapter the run uses, and why.
fn choice(adapters: &[WgpuAdapter], wanted: &[usize]) -> Check {
    let name = "wgpu device";
    match wanted.iter().find(|&&i| i >= adapters.len()) {
        Some(&index) => Check::new(
            Section::Backends,
            name,
            Status::Fail,
            format!(
                "the experiment asks for Wgpu({index}) but wgpu lists {} adapter(s)",
                adapters.len()
            ),
        )
        .hint(format!(
            "pick an index below {} (--set 'device=Wgpu(0)')",
            adapters.len()
        )),
        None if wanted.is_empty() => {
            let first = &adapters[0];
            let software = if first.software() {
                " (a software adapter: use it to test the GPU path, not to train fast)"
            } else {
                ""
            };
            Check::new(
                Section::Backends,
                name,
                Status::Info,
                format!(
                    "device: Wgpu(0) would use {}, the first adapter {} lists{software}",
                    first.name, first.api
                ),
            )
        }
        None => {
            let used: Vec<String> = wanted
                .iter()
                .map(|&i| format!("Wgpu({i}) = {}", adapters[i].name))
                .collect();
            Check::new(
                Section::Backends,
                name,
                Status::Ok,
                format!(
                    "{}: the experiment's device field names it",
                    used.join(", ")
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(index: usize, kind: &str) -> WgpuAdapter {
        WgpuAdapter {
            index,
            name: format!("gpu {index}"),
            driver: "Mesa 22.3.6".into(),
            api: "Vulkan".into(),
            kind: kind.into(),
            shader_f16: true,
            max_buffer_bytes: 1 << 31,
        }
    }

    #[test]
    fn the_adapters_and_the_choice_are_listed() {
        let adapters = [adapter(0, "DiscreteGpu"), adapter(1, "Cpu")];
        let lines = checks(&adapters, &[1]);
        if !WGPU_COMPILED {
            assert_eq!(lines.len(), 1);
            assert_eq!(lines[0].status, Status::Fail);
            return;
        }
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1].detail.contains("software (runs on the CPU"),
            "{}",
            lines[1].detail
        );
        assert_eq!(lines[2].status, Status::Ok);
        assert!(
            lines[2].detail.starts_with("Wgpu(1) = gpu 1"),
            "{}",
            lines[2].detail
        );
        let wrong = checks(&adapters, &[2]);
        assert_eq!(wrong.last().map(|c| c.status), Some(Status::Fail));
        let unused = checks(&adapters, &[]);
        assert!(
            unused[2].detail.contains("Wgpu(0) would use gpu 0"),
            "{}",
            unused[2].detail
        );
        assert_eq!(checks(&[], &[0])[0].status, Status::Fail);
        assert_eq!(checks(&[], &[])[0].status, Status::Info);
    }
}

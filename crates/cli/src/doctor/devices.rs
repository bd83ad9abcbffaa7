//! The per-device lines: the kernel sanity check and half precision, on the CPU (Flex), on
//! every usable CUDA device and on every wgpu adapter. Each device runs under [`guarded`] so a panicking backend is a
//! failed line, not a crash.

use std::path::Path;

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::FloatDType;
use segburn_train::mixed_precision::Precision;

use super::fixtures::{check_pidnet, check_sam2, FixtureComparison};
use super::kernels::check_kernels;
use super::precision::check_half_precision;
use super::wide_conv::{check_wide_conv, WIDE_CONVS, WIDE_CONV_TOLERANCE};
use super::{Check, Section, Status};
use crate::device::guard::guarded;
use crate::device::wgpu_probe::WgpuAdapter;

/// Kernel and precision lines for the CPU, each CUDA device in `cuda_devices` and each wgpu
/// adapter, and the model-vs-official-fixture lines when `fixtures` is given.
pub fn checks(
    cuda_devices: &[usize],
    adapters: &[WgpuAdapter],
    wanted: Precision,
    fixtures: Option<&Path>,
) -> Vec<Check> {
    let mut checks = run_on::<Autodiff<Flex>>("cpu", &Default::default(), wanted, fixtures);
    checks.extend(cuda_checks(cuda_devices, wanted, fixtures));
    checks.extend(wgpu_checks(adapters, wanted, fixtures));
    checks
}

#[cfg(feature = "wgpu")]
fn wgpu_checks(adapters: &[WgpuAdapter], wanted: Precision, fixtures: Option<&Path>) -> Vec<Check> {
    use burn::backend::Wgpu;
    let mut checks = Vec::new();
    for adapter in adapters {
        let Some(device) = crate::device::wgpu_probe::wgpu_device(adapters, adapter.index) else {
            continue;
        };
        let label = format!("wgpu:{}", adapter.index);
        checks.extend(run_on::<Autodiff<Wgpu>>(&label, &device, wanted, fixtures));
    }
    checks
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_checks(_: &[WgpuAdapter], _: Precision, _: Option<&Path>) -> Vec<Check> {
    Vec::new()
}

#[cfg(feature = "cuda")]
fn cuda_checks(devices: &[usize], wanted: Precision, fixtures: Option<&Path>) -> Vec<Check> {
    use burn::backend::cuda::CudaDevice;
    use burn::backend::Cuda;
    let mut checks = Vec::new();
    for &index in devices {
        let (label, device) = (format!("cuda:{index}"), CudaDevice::new(index));
        checks.extend(run_on::<Autodiff<Cuda>>(&label, &device, wanted, fixtures));
        checks.extend(wide_conv_lines::<Autodiff<Cuda>>(&label, &device));
    }
    checks
}

#[cfg(not(feature = "cuda"))]
fn cuda_checks(_: &[usize], _: Precision, _: Option<&Path>) -> Vec<Check> {
    Vec::new()
}

/// The lines of one device.
pub fn run_on<B: AutodiffBackend>(
    label: &str,
    device: &B::Device,
    wanted: Precision,
    fixtures: Option<&Path>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    match guarded(|| check_kernels::<B>(device)) {
        Ok(Ok(comparisons)) => checks.extend(comparisons.into_iter().map(|c| {
            let detail = format!("max abs error {:.1e} (tolerance {:.1e})", c.max_abs_error, c.tolerance);
            let name = format!("{label} {}", c.name);
            if c.passed() {
                Check::new(Section::Kernels, name, Status::Ok, detail)
            } else {
                Check::new(Section::Kernels, name, Status::Fail, format!("WRONG RESULT: {detail}"))
                    .hint("this backend computes a wrong result here: report it with this output; meanwhile use another device")
            }
        })),
        Ok(Err(e)) | Err(e) => checks.push(
            Check::new(Section::Kernels, format!("{label} kernels"), Status::Fail, format!("the kernel check could not run: {e}"))
                .hint("the device is not usable; on a GPU, check the CUDA lines above"),
        ),
    }
    for (dtype, precision) in [
        (FloatDType::BF16, Precision::Bf16),
        (FloatDType::F16, Precision::F16),
    ] {
        let needed = wanted == precision;
        let name = format!("{label} {precision:?} (cast + matmul + backward)");
        let unsupported = if needed { Status::Fail } else { Status::Warn };
        let fallback = "train in F32 instead: --set train.precision=F32";
        checks.push(match guarded(|| check_half_precision::<B>(dtype, device)) {
            Ok(Ok(check)) => {
                let detail = format!(
                    "relative error vs f32 {:.1e} (bound {:.0e}){}{}",
                    check.relative_error,
                    check.tolerance,
                    if check.output_in_dtype {
                        ""
                    } else {
                        "; the matmul did not return the half dtype"
                    },
                    if check.gradient_is_f32 {
                        ""
                    } else {
                        "; the master gradient is not f32"
                    },
                );
                if check.passed() {
                    Check::new(Section::Kernels, name, Status::Ok, detail)
                } else {
                    Check::new(Section::Kernels, name, unsupported, detail).hint(fallback)
                }
            }
            Ok(Err(e)) | Err(e) => Check::new(
                Section::Kernels,
                name,
                unsupported,
                format!("not supported: {e}"),
            )
            .hint(fallback),
        });
    }
    if let Some(dir) = fixtures {
        checks.extend(fixture_lines(
            label,
            "PIDNet-S",
            guarded(|| check_pidnet::<B::InnerBackend>(dir, device)),
        ));
        checks.extend(fixture_lines(
            label,
            "SAM2",
            guarded(|| check_sam2::<B::InnerBackend>(dir, device)),
        ));
    }
    checks
}

/// The tracel-ai/burn#4445 check (conv2d backward on wide inputs) on a GPU, against the CPU.
pub fn wide_conv_lines<B: AutodiffBackend>(label: &str, device: &B::Device) -> Vec<Check> {
    WIDE_CONVS
        .iter()
        .map(|&conv| {
            let [n, c, h, w] = conv.input;
            let name = format!("{label} conv2d backward {n}x{c}x{h}x{w} stride {} (burn#4445)", conv.stride);
            match guarded(|| check_wide_conv::<B>(conv, device)) {
                Ok(Ok(result)) if result.passed() => Check::new(
                    Section::Kernels,
                    name,
                    Status::Ok,
                    format!("gradients vs the CPU: relative error {:.1e} (bound {WIDE_CONV_TOLERANCE:.0e})", result.relative_error),
                ),
                Ok(Ok(result)) => Check::new(
                    Section::Kernels,
                    name,
                    Status::Fail,
                    format!("WRONG gradients vs the CPU: relative error {:.1e}", result.relative_error),
                ),
                Ok(Err(e)) | Err(e) => Check::new(Section::Kernels, name, Status::Fail, format!("failed: {e}")).hint(
                    "the known Burn bug tracel-ai/burn#4445: training at this resolution would crash on this GPU; \
                     train on smaller crops, or on the CPU (--set device=Cpu)",
                ),
            }
        })
        .collect()
}

fn fixture_lines(
    label: &str,
    model: &str,
    outcome: Result<Result<Vec<FixtureComparison>, String>, String>,
) -> Vec<Check> {
    match outcome {
        Ok(Ok(comparisons)) => comparisons
            .into_iter()
            .map(|c| {
                let name = format!("{label} {}", c.name);
                let detail = match c.tolerance {
                    Some(t) => format!("max abs error {:.1e} (tolerance {t:.0e})", c.max_abs_error),
                    None => format!("max abs error {:.1e} (reported only)", c.max_abs_error),
                };
                let status = match (c.passed(), c.tolerance) {
                    (true, Some(_)) => Status::Ok,
                    (true, None) => Status::Info,
                    (false, _) => Status::Fail,
                };
                Check::new(Section::Kernels, name, status, detail)
            })
            .collect(),
        Ok(Err(e)) | Err(e) => vec![Check::new(
            Section::Kernels,
            format!("{label} {model} vs official fixtures"),
            Status::Fail,
            format!("could not run: {e}"),
        )
        .hint("--fixtures DIR must hold pidnet_s/ and sam2/ from the shared fixtures")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_passes_every_kernel_and_precision_line() {
        let lines = checks(&[], &[], Precision::Bf16, None);
        assert_eq!(lines.len(), 8, "{lines:#?}");
        for line in &lines {
            assert_eq!(line.status, Status::Ok, "{line:?}");
            assert!(line.name.starts_with("cpu "));
        }
        assert!(lines.iter().any(|l| l.name.contains("backward")));
    }
}

//! The kernel sanity check: the operations PIDNet is made of (batched matmul, a strided conv2d,
//! bilinear resize with `align_corners = false`) and one backward pass through conv → resize,
//! each run on a Burn device through the dispatch the models use (`segburn_kernels`: our CPU
//! kernels on Flex, Burn's ops and the GPU workarounds elsewhere) and compared with the
//! plain-Rust references in [`reference`](super::reference).

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Tensor, TensorData};
use segburn_kernels::{conv2d, interpolate_bilinear};
use serde::Serialize;

use super::reference::{self, max_abs, max_abs_diff, Conv2dShape};

/// Errors are judged relative to the size of the values: `max_abs_error <= RELATIVE_TOLERANCE
/// × max(1, max |reference|)`. f32 kernels land near 1e-6; a broken kernel is off by O(1).
/// The bound leaves room for GPUs that accumulate in a different order or use TF32.
pub const RELATIVE_TOLERANCE: f32 = 2e-3;

/// One operation compared with the CPU reference.
#[derive(Debug, Clone, Serialize)]
pub struct KernelComparison {
    pub name: String,
    pub max_abs_error: f32,
    pub tolerance: f32,
}

impl KernelComparison {
    fn new(name: &str, got: &[f32], expected: &[f32]) -> Self {
        Self {
            name: name.to_string(),
            max_abs_error: max_abs_diff(got, expected),
            tolerance: RELATIVE_TOLERANCE * max_abs(expected).max(1.0),
        }
    }

    pub fn passed(&self) -> bool {
        self.max_abs_error <= self.tolerance
    }
}

/// Host values of a tensor (any float dtype), or why they cannot be read.
fn host<B: burn::tensor::backend::Backend, const D: usize>(
    tensor: Tensor<B, D>,
) -> Result<Vec<f32>, String> {
    tensor
        .cast(burn::tensor::FloatDType::F32)
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .map_err(|e| format!("cannot read the result back: {e:?}"))
}

fn tensor<B: burn::tensor::backend::Backend, const D: usize>(
    values: Vec<f32>,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

const CONV: Conv2dShape = Conv2dShape {
    batch: 2,
    channels_in: 3,
    height: 17,
    width: 23,
    channels_out: 8,
    kernel: 3,
    stride: 2,
    padding: 1,
};

/// The bilinear resize target of the backward check (an upsample by ~2.3, as PIDNet's heads).
const RESIZE_TO: [usize; 2] = [21, 27];

/// Runs every comparison on `device`. An `Err` means a result could not even be read back.
pub fn check_kernels<B: AutodiffBackend>(
    device: &B::Device,
) -> Result<Vec<KernelComparison>, String> {
    Ok(vec![
        check_matmul::<B>(device)?,
        check_conv2d::<B>(device)?,
        check_bilinear::<B>(device)?,
    ]
    .into_iter()
    .chain(check_backward::<B>(device)?)
    .collect())
}

fn check_matmul<B: AutodiffBackend>(device: &B::Device) -> Result<KernelComparison, String> {
    let dims = [2, 33, 47, 29];
    let [batch, m, k, n] = dims;
    let a = reference::pseudo_random(batch * m * k, 11);
    let b = reference::pseudo_random(batch * k * n, 12);
    let expected = reference::matmul(&a, &b, dims);
    let got = tensor::<B, 3>(a, [batch, m, k], device).matmul(tensor(b, [batch, k, n], device));
    Ok(KernelComparison::new(
        "matmul [2,33,47]x[2,47,29]",
        &host(got)?,
        &expected,
    ))
}

fn conv_inputs(seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        reference::pseudo_random(CONV.input_len(), seed),
        reference::pseudo_random(CONV.weight_len(), seed + 1),
        reference::pseudo_random(CONV.channels_out, seed + 2),
    )
}

fn conv_options() -> ConvOptions<2> {
    ConvOptions::new([CONV.stride; 2], [CONV.padding; 2], [1, 1], 1)
}

fn conv_tensors<B: burn::tensor::backend::Backend>(
    (x, w, b): (Vec<f32>, Vec<f32>, Vec<f32>),
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 1>) {
    let k = CONV.kernel;
    (
        tensor(
            x,
            [CONV.batch, CONV.channels_in, CONV.height, CONV.width],
            device,
        ),
        tensor(w, [CONV.channels_out, CONV.channels_in, k, k], device),
        tensor(b, [CONV.channels_out], device),
    )
}

fn check_conv2d<B: AutodiffBackend>(device: &B::Device) -> Result<KernelComparison, String> {
    let inputs = conv_inputs(21);
    let expected = reference::conv2d(&inputs.0, &inputs.1, &inputs.2, &CONV);
    let (x, w, b) = conv_tensors::<B>(inputs, device);
    let got = conv2d(x, w, Some(b), conv_options());
    Ok(KernelComparison::new(
        "conv2d 3x3 stride 2 pad 1",
        &host(got)?,
        &expected,
    ))
}

fn check_bilinear<B: AutodiffBackend>(device: &B::Device) -> Result<KernelComparison, String> {
    let ([h, w], size) = ([13, 19], [32, 45]);
    let x = reference::pseudo_random(2 * 3 * h * w, 31);
    let expected = reference::bilinear(&x, 6, [h, w], size);
    let got = interpolate_bilinear(tensor::<B, 4>(x, [2, 3, h, w], device), size, false);
    Ok(KernelComparison::new(
        "bilinear resize (align_corners=false)",
        &host(got)?,
        &expected,
    ))
}

/// `loss = sum(resize(conv2d(x, w, b)) * g)`; the gradients of x, w and b against the
/// references' chain rule.
fn check_backward<B: AutodiffBackend>(device: &B::Device) -> Result<Vec<KernelComparison>, String> {
    let inputs = conv_inputs(41);
    let [oh, ow] = CONV.output_hw();
    let planes = CONV.batch * CONV.channels_out;
    let g = reference::pseudo_random(planes * RESIZE_TO[0] * RESIZE_TO[1], 44);
    let grad_conv_out = reference::bilinear_backward(&g, planes, [oh, ow], RESIZE_TO);
    let (expected_x, expected_w, expected_b) =
        reference::conv2d_backward(&inputs.0, &inputs.1, &grad_conv_out, &CONV);

    let (x, w, b) = conv_tensors::<B>(inputs, device);
    let (x, w, b) = (x.require_grad(), w.require_grad(), b.require_grad());
    let y = interpolate_bilinear(
        conv2d(x.clone(), w.clone(), Some(b.clone()), conv_options()),
        RESIZE_TO,
        false,
    );
    let g = tensor::<B, 4>(
        g,
        [CONV.batch, CONV.channels_out, RESIZE_TO[0], RESIZE_TO[1]],
        device,
    );
    let grads = (y * g).sum().backward();
    let missing = |what: &str| format!("the backward pass produced no gradient for {what}");
    let grad_x = x.grad(&grads).ok_or_else(|| missing("x"))?;
    let grad_w = w.grad(&grads).ok_or_else(|| missing("the weight"))?;
    let grad_b = b.grad(&grads).ok_or_else(|| missing("the bias"))?;
    Ok(vec![
        KernelComparison::new(
            "backward: d/dx conv2d→bilinear",
            &host(grad_x)?,
            &expected_x,
        ),
        KernelComparison::new("backward: d/dweight", &host(grad_w)?, &expected_w),
        KernelComparison::new("backward: d/dbias", &host(grad_b)?, &expected_b),
    ])
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};

    use super::*;

    #[test]
    fn every_kernel_passes_on_flex() {
        let checks = check_kernels::<Autodiff<Flex>>(&Default::default()).unwrap();
        assert_eq!(checks.len(), 6);
        for check in &checks {
            assert!(check.passed(), "{check:?}");
            assert!(check.max_abs_error < 1e-4, "{check:?}");
        }
    }

    #[test]
    fn a_wrong_result_fails() {
        let check = KernelComparison::new("x", &[1.0, 2.0], &[1.0, 2.5]);
        assert!(!check.passed());
        assert!(!KernelComparison::new("x", &[f32::NAN], &[0.0]).passed());
    }
}

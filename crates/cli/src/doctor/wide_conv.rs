//! The wide-input conv2d backward check (tracel-ai/burn#4445: on CUDA, conv2d backward on a
//! wide input such as 1×3×360×640 panics with "Upper corner must be in range [-128, 127] for
//! 4D im2col"). PIDNet's stem sees 1024×1024 crops in training and 1024×2048 images in
//! evaluation, so the shapes below are the and PIDNet's. Each runs forward + backward
//! on the device and on the CPU (Flex), and the gradients are compared.

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Tensor, TensorData};
use serde::Serialize;

use super::reference::{max_abs, max_abs_diff, pseudo_random};

/// A convolution: input `[n, c, h, w]`, `out` channels, 3×3 kernel, `stride`, padding 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WideConv {
    pub input: [usize; 4],
    pub out: usize,
    pub stride: usize,
}

/// The reproducer and PIDNet's stem at the training crop and the evaluation size.
pub const WIDE_CONVS: [WideConv; 3] = [
    WideConv {
        input: [1, 3, 360, 640],
        out: 3,
        stride: 1,
    },
    WideConv {
        input: [2, 3, 1024, 1024],
        out: 32,
        stride: 2,
    },
    WideConv {
        input: [1, 3, 1024, 2048],
        out: 32,
        stride: 2,
    },
];

/// Relative to the largest gradient; GPU reductions over ~10⁶ terms reorder the sums.
pub const WIDE_CONV_TOLERANCE: f32 = 5e-3;

/// One shape's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct WideConvResult {
    pub conv: WideConv,
    /// `max |device − cpu| / max |cpu|` over the input and weight gradients.
    pub relative_error: f32,
}

impl WideConvResult {
    pub fn passed(&self) -> bool {
        self.relative_error <= WIDE_CONV_TOLERANCE
    }
}

/// The input and weight gradients of `sum(conv2d(x, w) * g)`.
fn gradients<B: AutodiffBackend>(
    conv: WideConv,
    device: &B::Device,
) -> Result<(Vec<f32>, Vec<f32>), String> {
    let [n, c, h, w] = conv.input;
    let x = Tensor::<B, 4>::from_data(
        TensorData::new(pseudo_random(n * c * h * w, 61), conv.input),
        device,
    )
    .require_grad();
    let weight_shape = [conv.out, c, 3, 3];
    let weight = Tensor::<B, 4>::from_data(
        TensorData::new(pseudo_random(conv.out * c * 9, 62), weight_shape),
        device,
    )
    .require_grad();
    let y = conv2d(
        x.clone(),
        weight.clone(),
        None,
        ConvOptions::new([conv.stride; 2], [1, 1], [1, 1], 1),
    );
    let [_, _, oh, ow] = y.dims();
    let g = Tensor::<B, 4>::from_data(
        TensorData::new(
            pseudo_random(n * conv.out * oh * ow, 63),
            [n, conv.out, oh, ow],
        ),
        device,
    );
    let grads = (y * g).sum().backward();
    let read = |t: Option<Tensor<B::InnerBackend, 4>>, what: &str| -> Result<Vec<f32>, String> {
        t.ok_or_else(|| format!("no gradient for {what}"))?
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .map_err(|e| format!("{what}: {e:?}"))
    };
    Ok((
        read(x.grad(&grads), "the input")?,
        read(weight.grad(&grads), "the weight")?,
    ))
}

/// Runs `conv` on `device` and on the CPU and compares the gradients.
pub fn check_wide_conv<B: AutodiffBackend>(
    conv: WideConv,
    device: &B::Device,
) -> Result<WideConvResult, String> {
    let (gx, gw) = gradients::<B>(conv, device)?;
    let (rx, rw) = gradients::<Autodiff<Flex>>(conv, &Default::default())?;
    let relative = |a: &[f32], b: &[f32]| max_abs_diff(a, b) / max_abs(b).max(f32::MIN_POSITIVE);
    Ok(WideConvResult {
        conv,
        relative_error: relative(&gx, &rx).max(relative(&gw, &rw)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_runs_and_passes_on_the_cpu_at_a_small_wide_shape() {
        let conv = WideConv {
            input: [1, 3, 16, 96],
            out: 4,
            stride: 2,
        };
        let result = check_wide_conv::<Autodiff<Flex>>(conv, &Default::default()).unwrap();
        assert!(
            result.passed() && result.relative_error == 0.0,
            "{result:?}"
        );
    }
}

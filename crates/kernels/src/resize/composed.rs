//! The bilinear resize as a composition of Burn tensor ops, for training on backends whose
//! `interpolate` has no bilinear backward: burn-cubecl 0.21 (CUDA, wgpu, ROCm) panics with
//! "bilinear interpolation backward is not supported by JIT backend". The resize is separable,
//! so each axis is two gathers and a weighted sum, `x[low] · w_low + x[high] · w_high`; `select`
//! (backward: a scatter-add), the broadcast `mul` and the `add` have a backward on every backend.
//!
//! The taps are the ones our CPU kernels use (`BilinearGeometry`, PyTorch's source indices and
//! weights for both corner conventions, computed in f64 on the host); the weights are created
//! directly in the input's dtype, so a half-precision model meets no f32 tensor.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use super::bilinear::{BilinearGeometry, Tap};

/// PyTorch's `F.interpolate(x, size, mode='bilinear', align_corners)` by `select`, `mul` and
/// `add`, differentiable on every backend: `[N, C, H, W] -> [N, C, size[0], size[1]]`.
pub fn interpolate_bilinear_composed<B: Backend>(
    x: Tensor<B, 4>,
    size: [usize; 2],
    align_corners: bool,
) -> Tensor<B, 4> {
    let [n, c, h, w] = x.dims();
    assert!(
        h > 0 && w > 0 && size.iter().all(|&s| s > 0),
        "bilinear resize of an empty size: [{n}, {c}, {h}, {w}] -> {size:?}"
    );
    let geometry = BilinearGeometry {
        planes: n * c,
        in_size: [h, w],
        out_size: size,
        align_corners,
    };
    let x = resize_axis(x, &geometry, 0);
    resize_axis(x, &geometry, 1)
}

/// Resizes dimension `2 + axis` of `x` (0: rows, 1: columns).
fn resize_axis<B: Backend>(
    x: Tensor<B, 4>,
    geometry: &BilinearGeometry,
    axis: usize,
) -> Tensor<B, 4> {
    let (input, output) = (geometry.in_size[axis], geometry.out_size[axis]);
    if input == output {
        // Both conventions then map `dst` to `src = dst` exactly: the identity.
        return x;
    }
    let taps = geometry.taps::<f64>(axis);
    let (device, dtype, dim) = (x.device(), x.dtype(), 2 + axis);
    let indices = |pick: fn(&Tap<f64>) -> usize| {
        let values: Vec<i64> = taps.iter().map(|tap| pick(tap) as i64).collect();
        Tensor::<B, 1, Int>::from_data(TensorData::new(values, [output]), &device)
    };
    let low = x.clone().select(dim, indices(|tap| tap.low));
    if taps.iter().all(|tap| tap.high_weight == 0.0) {
        // Every output sits on a source sample (e.g. 9 -> 5 with aligned corners).
        return low;
    }
    let mut weight_shape = [1; 4];
    weight_shape[dim] = output;
    let weights = |pick: fn(&Tap<f64>) -> f64| {
        let values: Vec<f64> = taps.iter().map(pick).collect();
        Tensor::<B, 4>::from_data(TensorData::new(values, weight_shape), (&device, dtype))
    };
    let high = x.select(dim, indices(|tap| tap.high));
    low * weights(|tap| tap.low_weight) + high * weights(|tap| tap.high_weight)
}

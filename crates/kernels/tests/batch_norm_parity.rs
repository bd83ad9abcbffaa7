//! The training batch norm against Burn's composition and the textbook formulas, values and
//! gradients.

use burn::tensor::{DType, Tensor};
use segburn_kernels as kernels;

mod common;
use common::*;

/// A training batch norm composed of Burn's ops (batch mean, biased variance).
fn batch_norm_by_burn(
    x: Tensor<AD, 4>,
    weight: Tensor<AD, 1>,
    bias: Tensor<AD, 1>,
    eps: f64,
) -> Tensor<AD, 4> {
    let [n, c, h, w] = x.dims();
    let count = (n * h * w) as f64;
    let per_channel = |t: Tensor<AD, 4>| t.sum_dim(0).sum_dim(2).sum_dim(3) / count;
    let mean = per_channel(x.clone());
    let centered = x - mean;
    let var = per_channel(centered.clone().square());
    let scale = weight.reshape([1, c, 1, 1]) / (var + eps).sqrt();
    centered * scale + bias.reshape([1, c, 1, 1])
}

/// The batch norm's output and its gradients of `Σ y · r` by the textbook formulas, on the host
/// in f64: the reference both implementations are measured against.
fn batch_norm_by_definition(
    [x, w, b, r]: [&[f64]; 4],
    [n, c, h, wd]: [usize; 4],
    eps: f64,
) -> [Vec<f64>; 4] {
    let (plane, count) = (h * wd, (n * h * wd) as f64);
    let mut out = [
        vec![0.0; x.len()],
        vec![0.0; x.len()],
        vec![0.0; c],
        vec![0.0; c],
    ];
    for ch in 0..c {
        let idx: Vec<usize> = (0..n)
            .flat_map(|i| (i * c + ch) * plane..(i * c + ch + 1) * plane)
            .collect();
        let mean = idx.iter().map(|&i| x[i]).sum::<f64>() / count;
        let var = idx.iter().map(|&i| (x[i] - mean).powi(2)).sum::<f64>() / count;
        let inv_std = 1.0 / (var + eps).sqrt();
        let x_hat = |i: usize| (x[i] - mean) * inv_std;
        let sum_r: f64 = idx.iter().map(|&i| r[i]).sum();
        let sum_r_xhat: f64 = idx.iter().map(|&i| r[i] * x_hat(i)).sum();
        for &i in &idx {
            out[0][i] = x_hat(i) * w[ch] + b[ch];
            out[1][i] = w[ch] * inv_std * (r[i] - sum_r / count - x_hat(i) * sum_r_xhat / count);
        }
        out[2][ch] = sum_r_xhat;
        out[3][ch] = sum_r;
    }
    out
}

#[test]
fn training_batch_norm_matches_burns_ops_values_and_gradients() {
    for (shape, seed) in [([2, 3, 5, 7], 1), ([1, 4, 1, 1], 2), ([3, 16, 9, 33], 3)] {
        let c = shape[1];
        let run = |ours: bool, dtype: DType| {
            let x = (fixed(shape, seed, dtype) * 2.0 + 0.5).require_grad();
            let weight = (fixed([c], seed + 1, dtype) + 1.5).require_grad();
            let bias = fixed([c], seed + 2, dtype).require_grad();
            let out = if ours {
                let (out, ..) =
                    kernels::batch_norm_train(x.clone(), weight.clone(), bias.clone(), 1e-5)
                        .expect("training on Flex in f32/f64 runs our batch norm");
                out
            } else {
                batch_norm_by_burn(x.clone(), weight.clone(), bias.clone(), 1e-5)
            };
            let r = fixed(out.dims(), seed + 3, dtype);
            let grads = (out.clone() * r).sum().backward();
            [
                tensor_values(out),
                tensor_values(x.grad(&grads).expect("a gradient")),
                tensor_values(weight.grad(&grads).expect("a gradient")),
                tensor_values(bias.grad(&grads).expect("a gradient")),
            ]
        };
        // Against the f64 textbook formulas: ours in f64 to a few ulp; in f32 within 3× the
        // error of Burn's own f32 composition (the input gradient cancels
        // g − mean(g) − x̂·mean(g·x̂), so f32's error there is well above one rounding).
        // Burn's f64 composition is printed too: it is ~5e-10 off the formulas on the input
        // gradient (its chain of broadcasts and reductions), so it cannot be the f64 reference.
        let inputs = [
            tensor_values(fixed(shape, seed, DType::F64) * 2.0 + 0.5),
            tensor_values(fixed([c], seed + 1, DType::F64) + 1.5),
            tensor_values(fixed([c], seed + 2, DType::F64)),
            tensor_values(fixed(shape, seed + 3, DType::F64)),
        ];
        let reference = batch_norm_by_definition(
            [&inputs[0], &inputs[1], &inputs[2], &inputs[3]],
            shape,
            1e-5,
        );
        let [ours64, burn64, ours32, burn32] = [
            run(true, DType::F64),
            run(false, DType::F64),
            run(true, DType::F32),
            run(false, DType::F32),
        ];
        for (i, what) in ["output", "input grad", "weight grad", "bias grad"]
            .iter()
            .enumerate()
        {
            let error = |values: &[f64]| rel_l2(values, &reference[i]);
            let [err64, burn_err64, err32, burn_err32] =
                [&ours64[i], &burn64[i], &ours32[i], &burn32[i]].map(|v| error(v));
            println!(
                "batch norm {shape:?} {what}: f64 {err64:.1e} (Burn's {burn_err64:.1e}), \
                 f32 {err32:.1e} (Burn's {burn_err32:.1e})"
            );
            assert!(err64 <= 1e-13, "{what} f64 {shape:?}: rel-L2 {err64:e}");
            let bound = 3.0 * burn_err32 + 1e-7;
            assert!(
                err32 <= bound,
                "{what} f32 {shape:?}: rel-L2 {err32:e} > {bound:e}"
            );
        }
    }
    // Without autodiff, or in half precision, the kernel does not run.
    let plain = fixed_plain([1, 2, 3, 3], 1, DType::F32);
    let [w, b] = [
        fixed_plain([2], 2, DType::F32),
        fixed_plain([2], 3, DType::F32),
    ];
    assert!(kernels::batch_norm_train(plain, w, b, 1e-5).is_none());
    let half = fixed([1, 2, 3, 3], 1, DType::BF16);
    let [w, b] = [fixed([2], 2, DType::BF16), fixed([2], 3, DType::BF16)];
    assert!(kernels::batch_norm_train(half, w, b, 1e-5).is_none());
}

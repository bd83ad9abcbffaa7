//! The loss's class log-probabilities against Burn's `exp`/`sum_dim`/`log`/`gather`, values
//! and gradients.

use burn::tensor::{DType, Int, Tensor, TensorData};
use segburn_kernels as kernels;

mod common;
use common::*;

/// `log_softmax(x, 1)` gathered at `index` by Burn's ops: the reference of `class_log_probs`.
fn class_log_probs_by_burn<B: burn::tensor::backend::Backend>(
    x: Tensor<B, 4>,
    index: Tensor<B, 4, Int>,
) -> Tensor<B, 3> {
    let [n, _, h, w] = x.dims();
    let log_sum_exp = x.clone().exp().sum_dim(1).log();
    (x.gather(1, index) - log_sum_exp).reshape([n, h, w])
}

#[test]
fn class_log_probs_match_burns_ops_values_and_gradients() {
    // One class, an odd image, PIDNet's 19 classes over several blocks of pixels.
    for (shape, seed) in [([2, 1, 3, 5], 1), ([2, 5, 7, 9], 2), ([1, 19, 80, 77], 3)] {
        let [n, c, h, w] = shape;
        let labels: Vec<i64> = (0..n * h * w)
            .map(|i| ((i * 7 + i / 5) % c) as i64)
            .collect();
        let index = || {
            Tensor::<AD, 4, Int>::from_data(
                TensorData::new(labels.clone(), [n, 1, h, w]),
                &Default::default(),
            )
        };
        // f64: the same sums of a few exponentials in another order. f32: each log-probability
        // carries a few roundings of terms of size ≤ 1 in both implementations.
        for (dtype, tol) in [(DType::F64, 1e-13), (DType::F32, 1e-6)] {
            let run = |ours: bool| {
                let x = (fixed(shape, seed, dtype) * 3.0).require_grad();
                let out = if ours {
                    kernels::class_log_probs(x.clone(), index())
                } else {
                    class_log_probs_by_burn(x.clone(), index())
                };
                let r = fixed(out.dims(), seed + 10, dtype);
                let grads = (out.clone() * r).sum().backward();
                let grad = tensor_values(x.grad(&grads).expect("a gradient"));
                [tensor_values(out), grad]
            };
            let (ours, burn) = (run(true), run(false));
            if c == 1 {
                // One class: every log-probability is 0 and so is the gradient (Burn's is
                // rounding noise around 0, which a relative error cannot compare).
                for (what, values) in ["values", "gradient"].iter().zip(&ours) {
                    assert!(values.iter().all(|v| v.abs() <= 1e-6), "one class: {what}");
                }
                continue;
            }
            if c == 19 && dtype == DType::F32 {
                // Equal within rounding but not bit for bit (other exponentials, another
                // order of the sums): equality would mean the dispatch fell through to Burn.
                assert!(ours != burn, "class_log_probs did not use its own kernel");
            }
            for (what, (a, b)) in ["values", "gradient"].iter().zip(ours.iter().zip(&burn)) {
                assert_eq!(a.len(), b.len(), "{what}");
                let err = rel_l2(a, b);
                println!("class_log_probs {shape:?} {dtype:?} {what}: rel-L2 {err:.1e}");
                assert!(
                    err <= tol,
                    "{what} {dtype:?} {shape:?}: rel-L2 {err:e} > {tol:e}"
                );
            }
            // Without autodiff (inference) the values are the same kernel's.
            let x = fixed_plain(shape, seed, dtype) * 3.0;
            let index = index().inner();
            let plain = kernels::class_log_probs(x.clone(), index.clone());
            let err = rel_l2(
                &tensor_values(plain),
                &tensor_values(class_log_probs_by_burn(x, index)),
            );
            assert!(err <= tol, "inference {dtype:?} {shape:?}: rel-L2 {err:e}");
        }
    }
}

//! PagFM's pixel gate (channel dot product and blend) against Burn's ops, in inference and
//! training.

use burn::tensor::{DType, Tensor};
use segburn_kernels as kernels;

mod common;
use common::*;

#[test]
fn pixel_gate_in_inference_matches_burns_ops() {
    // PagFM's gate logit (channel dot product) and blend on plain Flex run our kernels; Burn's
    // broadcasting ops are the reference. The blend has the same bits, the dot product sums
    // in another order than the matrix product with ones.
    for (shape, seed) in [([1, 1, 1, 1], 1), ([2, 3, 7, 5], 2), ([1, 64, 33, 70], 3)] {
        for (dtype, tol) in [(DType::F64, 1e-14), (DType::F32, 1e-6)] {
            let [n, _, h, w] = shape;
            let a = fixed_plain(shape, seed, dtype);
            let b = fixed_plain(shape, seed + 10, dtype);
            let ours = kernels::channel_dot(a.clone(), b.clone());
            let burn = kernels::channel_dot_by_burn(a.clone(), b.clone());
            assert_eq!(ours.dims(), [n, 1, h, w]);
            let err = rel_l2(&tensor_values(ours), &tensor_values(burn));
            assert!(
                err <= tol,
                "channel dot {dtype:?} {shape:?}: rel-L2 {err:e}"
            );

            let s = burn::tensor::activation::sigmoid(fixed_plain([n, 1, h, w], seed + 20, dtype));
            let ours = tensor_values(kernels::gate_blend(a.clone(), b.clone(), s.clone()));
            let burn = tensor_values(kernels::gate_blend_by_burn(a, b, s));
            assert_eq!(ours.len(), burn.len());
            assert!(
                ours.iter()
                    .zip(&burn)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "blend {dtype:?} {shape:?}: not the bits of Burn's ops"
            );
        }
    }
}

/// The gate's `[logit, blend]` outputs and the gradients of `Σ out·r` for the inputs
/// `[a, b, (x = a), (y = b), s]`, by our ops (`own`) or Burn's.
fn pixel_gate_values_and_gradients(
    shape: [usize; 4],
    seed: u64,
    dtype: DType,
    own: bool,
) -> Vec<Vec<f64>> {
    let [n, _, h, w] = shape;
    let a = fixed(shape, seed, dtype).require_grad();
    let b = fixed(shape, seed + 10, dtype).require_grad();
    let s = fixed([n, 1, h, w], seed + 20, dtype).require_grad();
    let (logit, blend) = if own {
        (
            kernels::channel_dot(a.clone(), b.clone()),
            kernels::gate_blend(a.clone(), b.clone(), s.clone()),
        )
    } else {
        (
            kernels::channel_dot_by_burn(a.clone(), b.clone()),
            kernels::gate_blend_by_burn(a.clone(), b.clone(), s.clone()),
        )
    };
    let r_logit = fixed([n, 1, h, w], seed + 30, dtype);
    let r_blend = fixed(shape, seed + 40, dtype);
    let loss = (logit.clone() * r_logit).sum() + (blend.clone() * r_blend).sum();
    let grads = loss.backward();
    let grad = |t: &Tensor<AD, 4>| tensor_values(t.grad(&grads).expect("a gradient"));
    vec![
        tensor_values(logit),
        tensor_values(blend),
        grad(&a),
        grad(&b),
        grad(&s),
    ]
}

#[test]
fn pixel_gate_in_training_matches_burns_ops_values_and_gradients() {
    for (shape, seed) in [([1, 1, 1, 1], 1), ([2, 3, 7, 5], 2), ([2, 32, 17, 40], 3)] {
        for (dtype, tol) in [(DType::F64, 1e-14), (DType::F32, 2e-6)] {
            let ours = pixel_gate_values_and_gradients(shape, seed, dtype, true);
            let burn = pixel_gate_values_and_gradients(shape, seed, dtype, false);
            let names = ["logit", "blend", "d a", "d b", "d s"];
            for ((name, ours), burn) in names.iter().zip(&ours).zip(&burn) {
                assert_eq!(ours.len(), burn.len(), "{name} {shape:?}");
                let err = rel_l2(ours, burn);
                assert!(err <= tol, "{name} {dtype:?} {shape:?}: rel-L2 {err:e}");
            }
        }
    }
}

//! The composed bilinear resize (the GPU backends' training path) on `Autodiff<Flex>`: values
//! and input gradients against Burn's `interpolate`, which has a bilinear backward on Flex, in
//! f32 and f64; in f16 and bf16 against the f32 result on the same (rounded) values.

use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::DType;
use segburn_kernels as kernels;

mod common;
use common::*;

/// The cases the issue names, then the parity tests' resizes.
fn cases() -> Vec<([usize; 4], [usize; 2])> {
    let named = [
        ([2, 3, 7, 5], [16, 9]),  // up, non-square, odd sizes
        ([1, 2, 33, 17], [8, 8]), // down, non-square input
        ([2, 2, 8, 8], [8, 8]),   // the identity: both passes skipped
        ([1, 3, 1, 9], [1, 1]),   // a single row, down to one pixel
        ([1, 2, 1, 9], [4, 1]),   // a single row up, a row down to one column
        ([1, 2, 9, 4], [5, 7]),   // 9 -> 5 with aligned corners: one gather, no weights
    ];
    named.into_iter().chain(RESIZES).collect()
}

/// Output and input gradient of `sum(resize(x) · g)` for `x` in `dtype`, with the values of
/// `x` and `g` first rounded to `values_in`.
fn run(
    (input, size): ([usize; 4], [usize; 2]),
    align_corners: bool,
    [dtype, values_in]: [DType; 2],
    composed: bool,
) -> [Vec<f64>; 2] {
    let x = fixed(input, 7, values_in).cast(dtype).require_grad();
    let out = if composed {
        kernels::interpolate_bilinear_composed(x.clone(), size, align_corners)
    } else {
        let options =
            InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(align_corners);
        burn::tensor::module::interpolate(x.clone(), size, options)
    };
    assert_eq!(out.dtype(), dtype, "the output follows the input's dtype");
    assert_eq!(out.dims(), [input[0], input[1], size[0], size[1]]);
    let g = fixed(out.dims(), 11, values_in).cast(dtype);
    let grads = (out.clone() * g).sum().backward();
    let grad = x.grad(&grads).expect("a gradient");
    assert_eq!(
        grad.dtype(),
        dtype,
        "the gradient follows the input's dtype"
    );
    [tensor_values(out), tensor_values(grad)]
}

/// The largest rel-L2 error of `subject` against `reference` over every case, both
/// conventions; each is the dtypes [`run`] takes and whether the composition computes it.
fn worst_error(what: &str, subject: ([DType; 2], bool), reference: ([DType; 2], bool)) -> [f64; 2] {
    let mut worst = [0.0f64; 2];
    for case in cases() {
        for align_corners in [false, true] {
            let a = run(case, align_corners, subject.0, subject.1);
            let b = run(case, align_corners, reference.0, reference.1);
            for (k, (a, b)) in a.iter().zip(&b).enumerate() {
                let err = rel_l2(a, b);
                println!("{what} {case:?} align_corners={align_corners} [output, grad][{k}]: rel-L2 {err:.1e}");
                worst[k] = worst[k].max(err);
            }
        }
    }
    println!(
        "{what}: worst rel-L2 output {:.1e}, input grad {:.1e}",
        worst[0], worst[1]
    );
    worst
}

#[test]
fn composed_bilinear_matches_burns_interpolate_in_f64_and_f32() {
    // Both compute the same two products per axis from the same f64 taps, in another order
    // (Burn mixes the four corners of a pixel at once): f64 differs by a few ulp; f32 by a few
    // roundings of 6e-8 per output, and per gradient sum of up to 16 terms per axis.
    for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 1e-6)] {
        let what = format!("{dtype:?}");
        let errors = worst_error(&what, ([dtype; 2], true), ([dtype; 2], false));
        assert_within(dtype, errors, tol);
    }
}

#[test]
fn composed_bilinear_in_half_precision_is_within_a_few_epsilons_of_f32() {
    // In f16/bf16 the weights, both products, the sum and each scatter-add of the gradient round
    // to the half type: a handful of roundings of ε/2 each, partly cancelling. The reference is
    // the f32 composition on the same rounded values, so only the arithmetic's error counts.
    for (dtype, epsilon) in [(DType::F16, 2f64.powi(-10)), (DType::BF16, 2f64.powi(-7))] {
        let tol = 2.0 * epsilon;
        let reference = ([DType::F32, dtype], true);
        let what = format!("{dtype:?} vs f32");
        let [output, grad] = worst_error(&what, ([dtype; 2], true), reference);
        // For scale, not asserted: Burn's own half-precision resize on Flex, same reference.
        worst_error(
            &format!("{dtype:?} Burn's op vs f32"),
            ([dtype; 2], false),
            reference,
        );
        assert_within(dtype, [output, grad], tol);
    }
}

/// The output's and the input gradient's rel-L2 errors are within `tol`.
fn assert_within(dtype: DType, [output, grad]: [f64; 2], tol: f64) {
    assert!(
        output <= tol,
        "{dtype:?} output: rel-L2 {output:e} > {tol:e}"
    );
    assert!(
        grad <= tol,
        "{dtype:?} input grad: rel-L2 {grad:e} > {tol:e}"
    );
}

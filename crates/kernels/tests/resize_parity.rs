//! The bilinear resize against Burn's `interpolate` on `Autodiff<Flex>`: values and input
//! gradients, up and down, non-integer ratios, output size 1, both `align_corners`.

use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::DType;
use segburn_kernels as kernels;

mod common;
use common::*;

/// Output and input gradient of `sum(resize(x) · r)`.
fn run_resize(
    (input, size): ([usize; 4], [usize; 2]),
    align_corners: bool,
    dtype: DType,
    ours: bool,
) -> [Vec<f64>; 2] {
    let x = fixed(input, 1, dtype).require_grad();
    let out = if ours {
        kernels::interpolate_bilinear(x.clone(), size, align_corners)
    } else {
        let options =
            InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(align_corners);
        burn::tensor::module::interpolate(x.clone(), size, options)
    };
    let r = fixed(out.dims(), 4, dtype);
    let grads = (out.clone() * r).sum().backward();
    let grad = tensor_values(x.grad(&grads).expect("a gradient"));
    [tensor_values(out), grad]
}

#[test]
fn own_bilinear_matches_burns_interpolate_in_f64_and_f32() {
    // f64: both sum the same few products in another order, so only a few ulp apart. f32: an
    // output is 3 roundings of terms no larger than the inputs (≤ 1); an input gradient sums up
    // to 16 terms per axis at ×8 (with random signs, so the sum is smaller than its terms), each
    // rounding by up to 6e-8 in both implementations: a relative error of ~1e-6 at the most.
    for case in RESIZES {
        for align_corners in [false, true] {
            for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 2e-6)] {
                let ours = run_resize(case, align_corners, dtype, true);
                let burn = run_resize(case, align_corners, dtype, false);
                for (what, (a, b)) in ["output", "input grad"].iter().zip(ours.iter().zip(&burn)) {
                    assert_eq!(a.len(), b.len(), "{what}");
                    let err = rel_l2(a, b);
                    println!("bilinear {case:?} align_corners={align_corners} {dtype:?} {what}: rel-L2 {err:.1e}");
                    assert!(
                        err <= tol,
                        "{what} {dtype:?} {case:?} align_corners={align_corners}: rel-L2 {err:e} > {tol:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn training_on_flex_runs_our_bilinear_resize() {
    // As for the convolution: equal within rounding, but not bit for bit (ours is separable).
    let case = RESIZES[0];
    let differs =
        run_resize(case, false, DType::F32, true) != run_resize(case, false, DType::F32, false);
    assert!(
        differs,
        "segburn_kernels::interpolate_bilinear did not use its own kernels"
    );
}

//! The mask-loss sums and gradient against their definition and Burn's composition.

use super::*;
use crate::accuracy::test_values as values;

/// The definition in f64, written out as the reference writes it (sigmoid, BCE with logits,
/// the focal modulation), and its derivative by central differences of the definition.
fn focal_by_definition(x: f64, t: f64, alpha: f64, gamma: f64) -> f64 {
    let p = 1.0 / (1.0 + (-x).exp());
    let ce = x.max(0.0) - x * t + (-x.abs()).exp().ln_1p();
    let p_t = p * t + (1.0 - p) * (1.0 - t);
    let alpha_t = if alpha >= 0.0 {
        alpha * t + (1.0 - alpha) * (1.0 - t)
    } else {
        1.0
    };
    ce * (1.0 - p_t).powf(gamma) * alpha_t
}

#[test]
fn sums_and_gradient_match_the_definition() {
    for (objects, masks, pixels, alpha, gamma) in [
        (2, 3, 7, 0.25, 2.0),
        (1, 1, 1, -1.0, 0.0),
        (3, 2, 2 * BLOCK + 5, 0.5, 1.5),
    ] {
        let rows = MaskRows {
            objects,
            masks,
            pixels,
            focal: Focal { alpha, gamma },
        };
        let logits: Vec<f64> = values(objects * masks * pixels, 11)
            .iter()
            .map(|v| 12.0 * v)
            .collect();
        // Binary targets, and a soft one where there is room for it.
        let targets: Vec<f64> = values(objects * pixels, 13)
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if i % 5 == 4 {
                    0.3
                } else {
                    f64::from(u8::from(*v > 0.2))
                }
            })
            .collect();
        let sums_grad = values(objects * masks * MASK_LOSS_SUMS, 17);
        let sums = mask_loss_sums(&logits, &targets, &rows);
        let grad = mask_loss_sums_grad(&logits, &targets, &sums_grad, &rows);
        for row in 0..objects * masks {
            let t_row = &targets[(row / masks) * pixels..][..pixels];
            let x_row = &logits[row * pixels..][..pixels];
            let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
            let want = [
                x_row
                    .iter()
                    .zip(t_row)
                    .map(|(&x, &t)| focal_by_definition(x, t, alpha, gamma))
                    .sum(),
                x_row.iter().zip(t_row).map(|(&x, &t)| sigmoid(x) * t).sum(),
                x_row.iter().map(|&x| sigmoid(x)).sum(),
                t_row.iter().sum(),
                x_row
                    .iter()
                    .zip(t_row)
                    .filter(|(&x, &t)| x > 0.0 && t > 0.0)
                    .count() as f64,
                x_row
                    .iter()
                    .zip(t_row)
                    .filter(|(&x, &t)| x > 0.0 || t > 0.0)
                    .count() as f64,
            ];
            for (k, (&got, want)) in sums[row * MASK_LOSS_SUMS..][..MASK_LOSS_SUMS]
                .iter()
                .zip(want)
                .enumerate()
            {
                assert!(
                    (got - want).abs() <= 1e-9 * (1.0 + want.abs()),
                    "{rows:?} row {row} sum {k}: {got} vs {want}"
                );
            }
            let g = &sums_grad[row * MASK_LOSS_SUMS..];
            for i in 0..pixels {
                let (x, t) = (x_row[i], t_row[i]);
                let h = 1e-5;
                let focal_slope = (focal_by_definition(x + h, t, alpha, gamma)
                    - focal_by_definition(x - h, t, alpha, gamma))
                    / (2.0 * h);
                let p = sigmoid(x);
                let want = g[0] * focal_slope + (g[1] * t + g[2]) * p * (1.0 - p);
                let got = grad[row * pixels + i];
                assert!(
                    (got - want).abs() <= 1e-7 * (1.0 + want.abs()),
                    "{rows:?} row {row} pixel {i} (x {x}, t {t}): {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn ln_1p_matches_the_standard_library() {
    let mut worst = 0.0f64;
    for i in 1..=200_000 {
        let e = f64::from(i) / 200_000.0;
        worst = worst.max(((ln_1p_unit(e) - e.ln_1p()) / e.ln_1p()).abs());
    }
    // The series' truncation is under 1e-15; its rounding adds a few ulp (1.1e-15 measured).
    assert!(worst <= 2e-15, "{worst:e}");
    assert_eq!(ln_1p_unit(0.0), 0.0);
}

/// The AVX2 and AVX-512 builds of the pixel code against the portable build, for each
/// modulation, where the CPU has them.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_vector_builds_give_the_same_bits() {
    let x: Vec<f32> = values(3 * LANES + 5, 41)
        .iter()
        .map(|v| (9.0 * v) as f32)
        .collect();
    let t: Vec<f32> = values(x.len(), 43)
        .iter()
        .map(|v| f32::from(u8::from(*v > 0.0)))
        .collect();
    let weights = class_weights(0.25);
    let sums_grad = [0.5, -1.0, 2.0];
    fn compare(x: &[f32], t: &[f32], weights: (f64, f64), g: [f64; 3], m: impl Modulation) {
        let sums = block_sums(x, t, weights, m);
        let mut grad = vec![0.0f32; x.len()];
        block_grad(&mut grad, x, t, g, weights, m);
        let mut built = vec![0.0f32; x.len()];
        if has_avx2() {
            // SAFETY: the CPU has AVX2 (checked).
            assert_eq!(unsafe { block_sums_avx2(x, t, weights, m) }, sums);
            // SAFETY: as above.
            unsafe { block_grad_avx2(&mut built, x, t, g, weights, m) };
            assert_eq!(built, grad);
        }
        if has_avx512() {
            // SAFETY: the CPU has AVX-512F (checked).
            assert_eq!(unsafe { block_sums_avx512(x, t, weights, m) }, sums);
            // SAFETY: as above.
            unsafe { block_grad_avx512(&mut built, x, t, g, weights, m) };
            assert_eq!(built, grad);
        }
    }
    compare(&x, &t, weights, sums_grad, Unmodulated);
    compare(&x, &t, weights, sums_grad, Squared);
    compare(&x, &t, weights, sums_grad, Power(1.5));
}

#[test]
fn large_logits_stay_finite() {
    let rows = MaskRows {
        objects: 1,
        masks: 1,
        pixels: 4,
        focal: Focal {
            alpha: 0.25,
            gamma: 2.0,
        },
    };
    let logits = [-200.0f32, -30.0, 30.0, 200.0];
    let targets = [1.0f32, 0.0, 1.0, 0.0];
    let sums = mask_loss_sums(&logits, &targets, &rows);
    let grad = mask_loss_sums_grad(&logits, &targets, &[1.0; MASK_LOSS_SUMS], &rows);
    assert!(
        sums.iter().chain(&grad).all(|v| v.is_finite()),
        "{sums:?} {grad:?}"
    );
    // The two confident mistakes dominate the focal sum: 0.25 · 200 + 0.75 · 200.
    assert!((sums[0] - 200.0).abs() < 1e-3, "{}", sums[0]);
}

#[test]
fn shapes_that_do_not_fit_are_refused() {
    let rows = MaskRows {
        objects: 2,
        masks: 3,
        pixels: 4,
        focal: Focal {
            alpha: -1.0,
            gamma: 0.0,
        },
    };
    assert!(rows.fits(&[0.0f32; 24], &[0.0f32; 8]));
    assert!(!rows.fits(&[0.0f32; 24], &[0.0f32; 24]));
    assert!(!rows.fits(&[0.0f32; 23], &[0.0f32; 8]));
}

/// Values and gradients of the dispatch (our kernels on `Autodiff<Flex>` and on plain
/// `Flex`) against [`mask_loss_sums_by_burn`] on `Autodiff<Flex>`: in f64 to rounding, in
/// f32 within 3× the f32 error of Burn's composition (both against the f64 result).
#[test]
fn dispatch_matches_burns_ops_values_and_gradients() {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::{DType, TensorData};

    use crate::accuracy::{rel_l2, tensor_values};
    use crate::mask_loss_sums as dispatched;

    type Ad = Autodiff<Flex>;
    let tensor = |values: Vec<f64>, dtype: DType| {
        let len = values.len();
        Tensor::<Ad, 1>::from_data(TensorData::new(values, [len]), &Default::default()).cast(dtype)
    };
    // One pass for `(sums, dL/dlogits)` with `L = Σ sums · weights`.
    let run =
        |objects: usize, masks: usize, pixels: usize, focal: Focal, dtype: DType, own: bool| {
            let logits = tensor(
                values(objects * masks * pixels, 21)
                    .iter()
                    .map(|v| 9.0 * v)
                    .collect(),
                dtype,
            )
            .reshape([objects, masks, pixels])
            .require_grad();
            let targets = tensor(
                values(objects * pixels, 23)
                    .iter()
                    .map(|v| f64::from(u8::from(*v > 0.0)))
                    .collect(),
                dtype,
            )
            .reshape([objects, pixels]);
            let weights = tensor(values(objects * masks * MASK_LOSS_SUMS, 29), dtype).reshape([
                objects,
                masks,
                MASK_LOSS_SUMS,
            ]);
            let sums = if own {
                dispatched(logits.clone(), targets.clone(), focal)
            } else {
                mask_loss_sums_by_burn(logits.clone(), targets.clone(), focal)
            };
            let grads = (sums.clone() * weights).sum().backward();
            let grad = logits.grad(&grads).expect("the logits require a gradient");
            if own {
                // Inference (plain Flex) gives the same sums.
                let plain = dispatched(logits.inner(), targets.inner(), focal);
                assert_eq!(tensor_values(plain), tensor_values(sums.clone().inner()));
            }
            [tensor_values(sums.inner()), tensor_values(grad)]
        };
    for (objects, masks, pixels, alpha, gamma) in [
        (2, 3, 2 * BLOCK + 37, 0.25, 2.0),
        (3, 1, 1, -1.0, 0.0),
        (1, 2, 50, 0.6, 1.5),
    ] {
        let focal = Focal { alpha, gamma };
        let exact = run(objects, masks, pixels, focal, DType::F64, false);
        let ours64 = run(objects, masks, pixels, focal, DType::F64, true);
        let ours32 = run(objects, masks, pixels, focal, DType::F32, true);
        let burn32 = run(objects, masks, pixels, focal, DType::F32, false);
        for k in 0..2 {
            let what = ["sums", "gradient"][k];
            let e64 = rel_l2(&ours64[k], &exact[k]);
            assert!(
                e64 <= 1e-12,
                "{what} f64 ({objects}, {masks}, {pixels}): {e64:e}"
            );
            let (ours, burn) = (rel_l2(&ours32[k], &exact[k]), rel_l2(&burn32[k], &exact[k]));
            assert!(
                ours <= 3.0 * burn.max(1e-7),
                "{what} f32 ({objects}, {masks}, {pixels}): ours {ours:e}, Burn's {burn:e}"
            );
        }
    }
}

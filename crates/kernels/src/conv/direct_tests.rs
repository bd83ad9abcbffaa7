//! The direct kernel against the definition and the unfolding kernel.

use super::*;
use crate::accuracy::test_values as values;

/// One group, no dilation (what the direct kernel computes).
fn geometry(
    batch: usize,
    [in_channels, out_channels]: [usize; 2],
    in_size: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> ConvGeometry {
    let channels = [batch, in_channels, out_channels, 1];
    super::super::tests::geometry(channels, in_size, kernel, stride, padding, [1, 1])
}

/// The convolution plus bias by its definition in f64 (conv_tests' oracle), and the sum of
/// its terms' magnitudes.
fn by_definition(x: &[f32], w: &[f32], bias: &[f32], g: &ConvGeometry) -> [Vec<f64>; 2] {
    let f64s = |v: &[f32]| v.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
    let positions = g.out_size[0] * g.out_size[1];
    let no_grad = vec![0.0; g.batch * g.out_channels * positions];
    let ([mut sums, ..], [mut magnitudes, ..]) =
        super::super::tests::by_definition(&f64s(x), &f64s(w), &no_grad, g);
    for (plane, (sums, magnitudes)) in sums
        .chunks_mut(positions)
        .zip(magnitudes.chunks_mut(positions))
        .enumerate()
    {
        let b = f64::from(bias[plane % g.out_channels]);
        sums.iter_mut().for_each(|s| *s += b);
        magnitudes.iter_mut().for_each(|m| *m += b.abs());
    }
    [sums, magnitudes]
}

/// Odd sizes, both strides PIDNet uses, padding 0–2, channel counts that leave a partial
/// output block, and grids that end inside a register tile.
fn cases() -> Vec<ConvGeometry> {
    vec![
        geometry(2, [3, 5], [7, 9], [3, 3], [1, 1], [1, 1]),
        geometry(1, [4, 8], [10, 13], [3, 3], [2, 2], [1, 1]),
        geometry(2, [5, 11], [9, 6], [3, 3], [2, 2], [1, 1]),
        geometry(1, [2, 17], [17, 21], [3, 3], [1, 1], [0, 0]),
        geometry(1, [3, 9], [12, 11], [5, 3], [1, 2], [2, 1]),
        geometry(1, [6, 16], [8, 40], [3, 3], [1, 1], [1, 1]),
        geometry(1, [2, 3], [15, 15], [7, 7], [4, 4], [3, 3]),
        geometry(3, [8, 24], [5, 5], [3, 3], [1, 1], [1, 1]),
        geometry(1, [3, 4], [6, 6], [2, 2], [2, 2], [0, 0]),
        geometry(1, [16, 8], [1, 1], [3, 3], [1, 1], [1, 1]),
    ]
}

fn operands(g: &ConvGeometry, seed: u64) -> [Vec<f32>; 3] {
    let [h, w] = g.in_size;
    let patch = g.in_channels * g.kernel[0] * g.kernel[1];
    let f32s = |len: usize, seed: u64| values(len, seed).iter().map(|&v| v as f32).collect();
    [
        f32s(g.batch * g.in_channels * h * w, seed),
        f32s(g.out_channels * patch, seed + 1),
        f32s(g.out_channels, seed + 2),
    ]
}

#[test]
fn matches_the_definition_within_f32_rounding() {
    for (i, g) in cases().iter().enumerate() {
        let [x, w, b] = operands(g, 10 + i as u64);
        let [want, magnitude] = by_definition(&x, &w, &b, g);
        let terms = g.in_channels * g.kernel[0] * g.kernel[1] + 1;
        for build in [Build::Portable, Build::fastest()] {
            let got = conv2d_forward_with(&x, &w, Some(&b), g, Epilogue::default(), build)
                .expect("applies");
            assert_eq!(got.len(), want.len(), "{g:?}");
            for (k, ((&got, &want), &magnitude)) in
                got.iter().zip(&want).zip(&magnitude).enumerate()
            {
                // A sequential f32 sum of `terms` products errs by at most terms·ε·Σ|terms|.
                let bound = terms as f64 * f64::from(f32::EPSILON) * magnitude;
                let error = (f64::from(got) - want).abs();
                assert!(
                    error <= bound,
                    "{g:?} {build:?} output {k}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn without_bias_and_with_the_unfolding_kernel_agree() {
    for (i, g) in cases().iter().enumerate() {
        let [x, w, _] = operands(g, 40 + i as u64);
        let direct = conv2d_forward_direct(&x, &w, None, g, Epilogue::default()).expect("applies");
        let unfolded = super::super::unfold::conv2d_forward(&x, &w, None, g);
        let [_, magnitude] = by_definition(&x, &w, &vec![0.0; g.out_channels], g);
        let terms = (g.in_channels * g.kernel[0] * g.kernel[1]) as f64;
        for ((&a, &b), &m) in direct.iter().zip(&unfolded).zip(&magnitude) {
            let bound = 2.0 * terms * f64::from(f32::EPSILON) * m;
            assert!(
                (f64::from(a) - f64::from(b)).abs() <= bound,
                "{g:?}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn vector_build_gives_the_portable_bits() {
    if Build::fastest() == Build::Portable {
        // The portable build is what runs here; the other test covers it.
        eprintln!("no AVX-512 on this CPU: only the portable build ran");
    }
    for (i, g) in cases().iter().enumerate() {
        let [x, w, b] = operands(g, 70 + i as u64);
        let portable =
            conv2d_forward_with(&x, &w, Some(&b), g, Epilogue::default(), Build::Portable);
        let fastest =
            conv2d_forward_with(&x, &w, Some(&b), g, Epilogue::default(), Build::fastest());
        let bits =
            |v: Option<Vec<f32>>| v.map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
        assert_eq!(bits(portable), bits(fastest), "{g:?}");
    }
}

#[test]
fn residual_and_relu_in_the_write_give_the_bits_of_separate_passes() {
    for (i, g) in cases().iter().enumerate() {
        let [x, w, b] = operands(g, 130 + i as u64);
        let plain =
            conv2d_forward_direct(&x, &w, Some(&b), g, Epilogue::default()).expect("applies");
        let residual: Vec<f32> = values(plain.len(), 140 + i as u64)
            .iter()
            .map(|&v| v as f32)
            .collect();
        for relu in [false, true] {
            let epilogue = Epilogue {
                residual: Some(&residual),
                relu,
            };
            let fused = conv2d_forward_direct(&x, &w, Some(&b), g, epilogue).expect("applies");
            let relu_only = Epilogue {
                residual: None,
                relu,
            };
            let fused_relu =
                conv2d_forward_direct(&x, &w, Some(&b), g, relu_only).expect("applies");
            let activate = |v: f32| if relu { v.max(0.0) } else { v };
            let want: Vec<u32> = plain
                .iter()
                .zip(&residual)
                .map(|(&y, &r)| activate(y + r).to_bits())
                .collect();
            let got: Vec<u32> = fused.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{g:?} relu {relu}");
            let want: Vec<u32> = plain.iter().map(|&y| activate(y).to_bits()).collect();
            let got: Vec<u32> = fused_relu.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{g:?} relu only {relu}");
            if relu {
                assert!(fused.contains(&0.0), "{g:?}: ReLU clamped nothing");
            }
        }
    }
}

#[test]
fn same_bits_on_one_thread_and_on_many() {
    let g = geometry(2, [12, 20], [37, 29], [3, 3], [1, 1], [1, 1]);
    let [x, w, b] = operands(&g, 99);
    let many = conv2d_forward_direct(&x, &w, Some(&b), &g, Epilogue::default());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let one = pool.install(|| conv2d_forward_direct(&x, &w, Some(&b), &g, Epilogue::default()));
    assert_eq!(many, one);
}

#[test]
fn grouped_dilated_and_pointwise_convolutions_are_left_to_the_unfolding_kernel() {
    let mut g = geometry(1, [4, 4], [6, 6], [3, 3], [1, 1], [1, 1]);
    assert!(direct_conv_applies(&g));
    g.groups = 2;
    assert!(!direct_conv_applies(&g));
    g.groups = 1;
    g.dilation = [2, 2];
    assert!(!direct_conv_applies(&g));
    let pointwise = geometry(1, [4, 4], [6, 6], [1, 1], [1, 1], [0, 0]);
    assert!(!direct_conv_applies(&pointwise));
    let x = vec![0.0; 144];
    assert_eq!(
        conv2d_forward_direct(&x, &[0.0; 144], None, &g, Epilogue::default()),
        None
    );
}

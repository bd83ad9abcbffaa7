//! Unit tests of the unfolding kernels (`unfold.rs`, `col2im.rs`): every kernel against the convolution's definition, on odd shapes
//! and on shapes of several tiles, and independence from the number of threads.

use super::col2im::{conv2d_input_grad, RowTiles};
use super::geometry::ConvGeometry;
use super::unfold::{conv2d_forward, conv2d_weight_grad, tile_columns, Tiles};
use crate::accuracy::test_values as values;
use crate::product::{GemmFloat, Product};

/// Every product of the convolution by its definition, with signed coordinates and no
/// shared code with the kernels: `(x index, weight index, y index)` for
/// `Y[n, o, oy, ox] += W[o, c, ki, kj] · X[n, group(o)·C/groups + c, iy, ix]`.
fn connections(g: &ConvGeometry) -> Vec<(usize, usize, usize)> {
    let (gi, go) = (g.group_in(), g.group_out());
    let [kh, kw] = g.kernel;
    let [oh, ow] = g.out_size;
    let [ih, iw] = g.in_size.map(|v| v as isize);
    let mut all = Vec::new();
    for n in 0..g.batch {
        for o in 0..g.out_channels {
            for c in 0..gi {
                for (ki, kj) in (0..kh).flat_map(|ki| (0..kw).map(move |kj| (ki, kj))) {
                    for (oy, ox) in (0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy, ox))) {
                        let at = |o: usize, k: usize, axis: usize| {
                            (o * g.stride[axis] + k * g.dilation[axis]) as isize
                                - g.padding[axis] as isize
                        };
                        let (iy, ix) = (at(oy, ki, 0), at(ox, kj, 1));
                        if iy < 0 || ix < 0 || iy >= ih || ix >= iw {
                            continue;
                        }
                        let channel = n * g.in_channels + (o / go) * gi + c;
                        let xi = (channel * ih as usize + iy as usize) * iw as usize + ix as usize;
                        let wi = ((o * gi + c) * kh + ki) * kw + kj;
                        let yi = ((n * g.out_channels + o) * oh + oy) * ow + ox;
                        all.push((xi, wi, yi));
                    }
                }
            }
        }
    }
    all
}

/// Forward, weight gradient and input gradient by the definition, summed in f64, and the
/// sums of the terms' magnitudes (what bounds a float sum's rounding error).
pub(super) fn by_definition(
    x: &[f64],
    w: &[f64],
    dy: &[f64],
    g: &ConvGeometry,
) -> ([Vec<f64>; 3], [Vec<f64>; 3]) {
    let mut sums = [vec![0.0; dy.len()], vec![0.0; w.len()], vec![0.0; x.len()]];
    let mut magnitudes = sums.clone();
    for (xi, wi, yi) in connections(g) {
        for (k, (at, term)) in [
            (yi, w[wi] * x[xi]),
            (wi, dy[yi] * x[xi]),
            (xi, w[wi] * dy[yi]),
        ]
        .into_iter()
        .enumerate()
        {
            sums[k][at] += term;
            magnitudes[k][at] += term.abs();
        }
    }
    (sums, magnitudes)
}

/// A geometry with the output size PyTorch's formula gives.
pub(super) fn geometry(
    [batch, in_channels, out_channels, groups]: [usize; 4],
    in_size: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
) -> ConvGeometry {
    let mut g = ConvGeometry {
        batch,
        in_channels,
        in_size,
        out_channels,
        kernel,
        out_size: [0, 0],
        stride,
        padding,
        dilation,
        groups,
    };
    g.out_size = g.expected_out_size();
    g
}

/// A 3×3 convolution over 40×48 positions with 72 weights per output channel: 3 tiles of
/// positions, 8 tiles of rows.
const MANY_TILES: ConvGeometry = ConvGeometry {
    batch: 1,
    in_channels: 8,
    in_size: [40, 48],
    out_channels: 4,
    kernel: [3, 3],
    out_size: [40, 48],
    stride: [1, 1],
    padding: [1, 1],
    dilation: [1, 1],
    groups: 1,
};

#[test]
fn tiles_split_the_work_as_documented() {
    let g = MANY_TILES;
    assert_eq!(g.expected_out_size(), g.out_size);
    assert_eq!(Tiles::new(&g).count, 3);
    // The forward joins the narrow remainder (128 positions) to the last tile.
    let forward = Tiles::for_forward(&g);
    assert_eq!((forward.count, forward.range(1)), (2, 896..1920));
    assert_eq!(RowTiles::new(&g).count, 8);
}

#[test]
fn results_do_not_depend_on_the_number_of_threads() {
    let g = MANY_TILES;
    let x = values(g.batch * g.in_channels * g.in_positions(), 13);
    let w = values(g.out_channels * g.patch(), 17);
    let dy = values(g.batch * g.out_channels * g.out_positions(), 19);
    let (x, w, dy): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        x.iter().map(|&v| v as f32).collect(),
        w.iter().map(|&v| v as f32).collect(),
        dy.iter().map(|&v| v as f32).collect(),
    );
    let on_threads = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a thread pool");
        pool.install(|| {
            [
                conv2d_forward(&x, &w, None, &g),
                conv2d_weight_grad(&x, &dy, &g),
                conv2d_input_grad(&w, &dy, &g),
            ]
        })
    };
    let one = on_threads(1);
    for threads in [2, 3] {
        assert!(
            one == on_threads(threads),
            "{threads} threads differ from 1"
        );
    }
}

#[test]
fn matches_the_definition_on_odd_shapes() {
    let cases = [
        // Pointwise (no unfolding), 3×3 with padding, stride 2 on odd sizes, groups,
        // dilation, a rectangular kernel, and padding wider than the kernel reach.
        geometry([2, 5, 3, 1], [7, 9], [1, 1], [1, 1], [0, 0], [1, 1]),
        geometry([2, 4, 6, 1], [9, 7], [3, 3], [1, 1], [1, 1], [1, 1]),
        geometry([3, 3, 4, 1], [11, 8], [3, 3], [2, 2], [1, 1], [1, 1]),
        geometry([1, 6, 9, 3], [8, 8], [3, 3], [1, 1], [1, 1], [1, 1]),
        geometry([2, 2, 2, 1], [10, 9], [3, 3], [1, 1], [2, 2], [2, 2]),
        geometry([1, 3, 2, 1], [6, 10], [1, 5], [1, 2], [0, 2], [1, 1]),
        geometry([1, 2, 4, 2], [5, 5], [2, 2], [3, 3], [3, 3], [1, 1]),
        geometry([2, 4, 4, 4], [6, 6], [3, 3], [1, 1], [1, 1], [1, 1]),
        // Big enough for several tiles of positions (forward, weight gradient) and of rows
        // (input gradient), with stride 1 and 2.
        MANY_TILES,
        geometry([1, 8, 4, 1], [81, 96], [3, 3], [2, 2], [1, 1], [1, 1]),
    ];
    for g in cases {
        let x = values(g.batch * g.in_channels * g.in_positions(), 3);
        let w = values(g.out_channels * g.patch(), 5);
        let dy = values(g.batch * g.out_channels * g.out_positions(), 7);
        let (want, magnitudes) = by_definition(&x, &w, &dy, &g);
        let got = [
            conv2d_forward(&x, &w, None, &g),
            conv2d_weight_grad(&x, &dy, &g),
            conv2d_input_grad(&w, &dy, &g),
        ];
        for (what, (got, want)) in ["forward", "weight grad", "input grad"]
            .iter()
            .zip(got.iter().zip(&want))
        {
            assert_eq!(got.len(), want.len(), "{what} {g:?}");
            for (a, b) in got.iter().zip(want) {
                assert!(
                    (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                    "{what} {g:?}: {a} vs {b}"
                );
            }
        }
        // A bias is added to every output position of its channel.
        let bias = values(g.out_channels, 11);
        let with_bias = conv2d_forward(&x, &w, Some(&bias), &g);
        let whole = whole_image_forward(&x, &w, &g);
        for (a, b) in whole.iter().zip(&want[0]) {
            assert!(
                (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                "whole image {g:?}"
            );
        }
        let planes = want[0].chunks_exact(g.out_positions());
        for (plane, (got, want)) in with_bias
            .chunks_exact(g.out_positions())
            .zip(planes)
            .enumerate()
        {
            let b = bias[plane % g.out_channels];
            for (a, w) in got.iter().zip(want) {
                assert!((a - (w + b)).abs() <= 1e-12 * (1.0 + w.abs()), "bias {g:?}");
            }
        }
        // f32 agrees with the f64 definition to f32 rounding.
        let narrow = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<f32>>();
        let (x32, w32, dy32) = (narrow(&x), narrow(&w), narrow(&dy));
        let got32 = [
            conv2d_forward(&x32, &w32, None, &g),
            conv2d_weight_grad(&x32, &dy32, &g),
            conv2d_input_grad(&w32, &dy32, &g),
        ];
        // f32 sums of up to a few thousand terms: the error is bounded by the sum of the
        // terms' magnitudes times a multiple of f32's epsilon (a wrong index would be off
        // by whole terms).
        for (what, (got, (want, magnitude))) in ["forward", "weight grad", "input grad"]
            .iter()
            .zip(got32.iter().zip(want.iter().zip(&magnitudes)))
        {
            for ((a, b), m) in got.iter().zip(want).zip(magnitude) {
                let bound = 1e-5 * (1.0 + m);
                assert!(
                    (f64::from(*a) - b).abs() <= bound,
                    "f32 {what} {g:?}: {a} vs {b}"
                );
            }
        }
    }
}

/// The forward as one product per image and group over the whole image's unfolding, on all
/// threads (how the training forward ran before it was tiled, and how PyTorch's CPU GEMM path
/// sums).
fn whole_image_forward<T: GemmFloat>(x: &[T], w: &[T], g: &ConvGeometry) -> Vec<T> {
    let positions = g.out_positions();
    let mut out = vec![T::default(); g.batch * g.out_channels * positions];
    let mut cols = vec![T::default(); g.patch() * positions];
    for n in 0..g.batch {
        for group in 0..g.groups {
            let input = &x[g.input_range(n, group)];
            let cols = tile_columns(input, g, 0..positions, &mut cols);
            Product {
                shape: [g.group_out(), positions, g.patch()],
                lhs: (&w[g.weight_range(group)], [g.patch(), 1]),
                rhs: (cols, [positions, 1]),
            }
            .into(&mut out[g.output_range(n, group)], false);
        }
    }
    out
}

/// The tiled forward sums every output as one product over the whole image does, so the two
/// give the same bits: the training gradients, which amplify the forward's rounding, do not
/// move with the split (see [`conv2d_forward`]). The geometries are PIDNet's kinds of layers
/// at a small size: more than 512 weights per output channel (gemm blocks such sums), a narrow
/// last tile, one output channel, 1×1, stride 2 and groups.
#[test]
fn cached_tiles_and_whole_image_give_the_same_bits() {
    let cases = [
        // [batch, in, out, groups], in size, kernel, stride, padding
        ([2, 64, 32, 1], [24, 40], [3, 3], [1, 1], [1, 1]),
        ([2, 64, 64, 1], [21, 37], [3, 3], [1, 1], [1, 1]),
        ([1, 128, 64, 1], [17, 19], [3, 3], [1, 1], [1, 1]),
        ([1, 128, 128, 1], [16, 16], [3, 3], [2, 2], [1, 1]),
        ([2, 256, 96, 1], [9, 11], [3, 3], [1, 1], [1, 1]),
        ([2, 64, 1, 1], [30, 50], [1, 1], [1, 1], [0, 0]),
        ([2, 32, 19, 1], [33, 47], [1, 1], [1, 1], [0, 0]),
        ([1, 1024, 64, 1], [12, 20], [1, 1], [1, 1], [0, 0]),
        ([2, 3, 32, 1], [64, 96], [3, 3], [2, 2], [1, 1]),
        ([1, 48, 48, 3], [20, 26], [3, 3], [1, 1], [1, 1]),
    ];
    for (channels, in_size, kernel, stride, padding) in cases {
        let g = geometry(channels, in_size, kernel, stride, padding, [1, 1]);
        let to_f32 = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect::<Vec<f32>>();
        let x = to_f32(values(g.batch * g.in_channels * g.in_positions(), 3));
        let w = to_f32(values(g.out_channels * g.patch(), 5));
        let tiles = conv2d_forward(&x, &w, None, &g);
        let whole = whole_image_forward(&x, &w, &g);
        let differ = tiles
            .iter()
            .zip(&whole)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            differ,
            0,
            "{differ} of {} outputs differ: {g:?}",
            whole.len()
        );
    }
}

//! The two f32 convolution forward kernels side by side on PIDNet-S's 3×3 layers and
//! PIDNet-M's widest ones (eval at 1×3×512×1024): the unfolding one (im2col + gemm) and the direct one (reads the input in
//! place; AVX-512 only). Prints ms and GFLOP/s per layer shape, medians of 9 alternating runs.
//! `cargo run --release -p segburn-models --example conv_kernels [-- NAME]` (only the layers
//! whose name starts with NAME, e.g. `stem`)

use std::time::Instant;

use segburn_kernels::conv::{conv2d_forward, ConvGeometry};
use segburn_kernels::conv::{conv2d_forward_direct, direct_conv_is_fast_here};

fn geometry(c: usize, o: usize, size: [usize; 2], stride: usize) -> ConvGeometry {
    let mut g = ConvGeometry {
        batch: 1,
        in_channels: c,
        in_size: size,
        out_channels: o,
        kernel: [3, 3],
        out_size: [0, 0],
        stride: [stride; 2],
        padding: [1, 1],
        dilation: [1, 1],
        groups: 1,
    };
    g.out_size = g.expected_out_size();
    g
}

/// Median ms of `a` and of `b`, run alternately (this machine's speed drifts within seconds).
fn alternating_medians(mut a: impl FnMut(), mut b: impl FnMut()) -> [f64; 2] {
    let time = |run: &mut dyn FnMut()| {
        let start = Instant::now();
        run();
        start.elapsed().as_secs_f64() * 1e3
    };
    a();
    b();
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..9 {
        times[0].push(time(&mut a));
        times[1].push(time(&mut b));
    }
    times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    })
}

fn main() {
    println!(
        "threads: {}, direct kernel's AVX-512 build: {}",
        rayon::current_num_threads(),
        direct_conv_is_fast_here()
    );
    let layers = [
        ("stem 3→32 /2", geometry(3, 32, [512, 1024], 2)),
        ("stem 32→32 /2", geometry(32, 32, [256, 512], 2)),
        ("layer1 32", geometry(32, 32, [128, 256], 1)),
        ("layer2 32→64 /2", geometry(32, 64, [128, 256], 2)),
        ("layer2 64", geometry(64, 64, [64, 128], 1)),
        ("layer3 64→128 /2", geometry(64, 128, [64, 128], 2)),
        ("layer3 128", geometry(128, 128, [32, 64], 1)),
        ("layer4 256", geometry(256, 256, [16, 32], 1)),
        ("head 128→64", geometry(128, 64, [64, 128], 1)),
        // PIDNet-M's widest layers (planes 64): layer4 at 1/32 and layer3 at 1/16.
        ("M layer4 256→512 /2", geometry(256, 512, [32, 64], 2)),
        ("M layer4 512", geometry(512, 512, [16, 32], 1)),
        ("M layer3 256", geometry(256, 256, [32, 64], 1)),
    ];
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>8}",
        "layer", "unfold ms", "direct ms", "GF/s u", "GF/s d"
    );
    let only = std::env::args().nth(1).unwrap_or_default();
    for (name, g) in layers
        .into_iter()
        .filter(|(name, _)| name.starts_with(&only))
    {
        let x: Vec<f32> = (0..g.batch * g.in_channels * g.in_size[0] * g.in_size[1])
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let w: Vec<f32> = (0..g.out_channels * g.in_channels * 9)
            .map(|i| ((i * 104_729) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let b = vec![0.1f32; g.out_channels];
        let flop =
            2.0 * (g.out_channels * g.in_channels * 9 * g.out_size[0] * g.out_size[1]) as f64;
        let [unfold, direct] = alternating_medians(
            || {
                std::hint::black_box(conv2d_forward(&x, &w, Some(&b), &g));
            },
            || {
                std::hint::black_box(conv2d_forward_direct(
                    &x,
                    &w,
                    Some(&b),
                    &g,
                    Default::default(),
                ));
            },
        );
        println!(
            "{name:<18} {unfold:>10.2} {direct:>10.2} {:>8.1} {:>8.1}",
            flop / unfold / 1e6,
            flop / direct / 1e6
        );
    }
}

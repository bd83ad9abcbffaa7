//! Flex's conv2d against unfold + matmul for PIDNet's common 3×3 convolutions.
//! `cargo run --release -p segburn-models --example conv_paths`

use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::module::{conv2d, unfold4d};
use burn::tensor::ops::{ConvOptions, UnfoldOptions};
use burn::tensor::{Distribution, Tensor};

type B = Flex;

fn median_ms(mut f: impl FnMut()) -> f64 {
    f();
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[2]
}

fn main() {
    let device = Default::default();
    for (n, c, h, w) in [
        (1, 32, 256, 512),
        (1, 64, 128, 256),
        (2, 64, 128, 128),
        (1, 128, 64, 128),
    ] {
        let x = Tensor::<B, 4>::random([n, c, h, w], Distribution::Default, &device);
        let weight = Tensor::<B, 4>::random([c, c, 3, 3], Distribution::Default, &device);
        let direct = median_ms(|| {
            let _ = conv2d(
                x.clone(),
                weight.clone(),
                None,
                ConvOptions::new([1, 1], [1, 1], [1, 1], 1),
            )
            .into_data();
        });
        let unfolded = median_ms(|| {
            let cols = unfold4d(
                x.clone(),
                [3, 3],
                UnfoldOptions::new([1, 1], [1, 1], [1, 1]),
            );
            let out = weight.clone().reshape([1, c, c * 9]).matmul(cols);
            let _ = out.reshape([n, c, h, w]).into_data();
        });
        let a = Tensor::<B, 2>::random([c, c * 9], Distribution::Default, &device);
        let b = Tensor::<B, 2>::random([c * 9, h * w], Distribution::Default, &device);
        let matmul = median_ms(|| {
            let _ = a.clone().matmul(b.clone()).into_data();
        });
        let gflop = 2.0 * (n * c * c * 9 * h * w) as f64 / 1e9;
        println!(
            "[{n},{c},{h},{w}] {gflop:.2} GFLOP: conv2d {direct:.1} ms ({:.0} GFLOP/s), unfold+matmul {unfolded:.1} ms, matmul alone {matmul:.1} ms ({:.0} GFLOP/s per image)",
            gflop / direct * 1e3,
            gflop / n as f64 / matmul * 1e3
        );
    }
}

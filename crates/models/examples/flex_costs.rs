//! Where PIDNet's time goes on Flex, layer by layer: a 3×3 convolution (Flex's conv2d and an
//! unfold + matmul alternative), BatchNorm, and the cost of broadcasting a per-channel vector
//! over a 4-D tensor versus over 2-D rows (why BatchNorm works on the `[N·C, H·W]` view).
//! `cargo run --release -p segburn-models --example flex_costs`

use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::module::{conv2d, unfold4d};
use burn::tensor::ops::{ConvOptions, UnfoldOptions};
use burn::tensor::{Distribution, Tensor};
use segburn_models::nn::{conv2d_in_input_dtype, pidnet_conv, BatchNorm2dConfig};

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

fn batch_norm_costs() {
    let device = Default::default();
    for (c, h, w) in [(32, 256, 512), (64, 128, 256), (128, 64, 128)] {
        let x = Tensor::<B, 4>::random([1, c, h, w], Distribution::Default, &device);
        let conv = pidnet_conv::<B>(c, c, 3, 1, 1, false, &device);
        let bn = BatchNorm2dConfig::new(c).init::<B>(&device);
        let conv_only = median_ms(|| {
            let _ = conv2d_in_input_dtype(&conv, x.clone()).into_data();
        });
        let conv_bn = median_ms(|| {
            let _ = bn
                .forward(conv2d_in_input_dtype(&conv, x.clone()))
                .into_data();
        });
        let bn_only = median_ms(|| {
            let _ = bn.forward(x.clone()).into_data();
        });
        let add = median_ms(|| {
            let _ = (x.clone() + x.clone()).into_data();
        });
        let scale = Tensor::<B, 1>::random([c], Distribution::Default, &device);
        let bcast = median_ms(|| {
            let _ = (x.clone() * scale.clone().reshape([1, c, 1, 1])).into_data();
        });
        let expanded = median_ms(|| {
            let _ =
                (x.clone() * scale.clone().reshape([1, c, 1, 1]).expand([1, c, h, w])).into_data();
        });
        let repeated = median_ms(|| {
            let full = scale
                .clone()
                .reshape([c, 1])
                .repeat_dim(1, h * w)
                .reshape([1, c, h, w]);
            let _ = (x.clone() * full).into_data();
        });
        let rows = median_ms(|| {
            let _ = (x.clone().reshape([c, h * w]) * scale.clone().reshape([c, 1]))
                .reshape([1, c, h, w])
                .into_data();
        });
        println!("  mul by [1,c,1,1]: broadcast {bcast:.1} ms, expand {expanded:.1} ms, repeat {repeated:.1} ms, 2-D rows {rows:.1} ms");
        println!("[1,{c},{h},{w}]: conv {conv_only:.1} ms, conv+bn {conv_bn:.1} ms, bn alone {bn_only:.1} ms, same-shape add {add:.1} ms");
    }
}

fn convolution_paths() {
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

fn main() {
    batch_norm_costs();
    convolution_paths();
}

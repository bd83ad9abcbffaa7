//! Where PIDNet's eval time goes on Flex: a 3×3 convolution alone, with our BatchNorm
//! (broadcast affine), and with the BatchNorm folded into the convolution.
//! `cargo run --release -p segburn-models --example bn_cost`

use std::time::Instant;

use burn::backend::Flex;
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

fn main() {
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

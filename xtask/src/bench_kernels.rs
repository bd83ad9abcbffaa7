//! `cargo xtask bench-kernels`: segburn's CPU kernels (the convolution's forward, input and
//! weight gradients) against the Burn ops they replace, on
//! the shapes of a PIDNet-S training step at 2×3×512×512, in one run (median of 5 after one
//! warm-up each). Both run on Flex's compute pool (`RAYON_NUM_THREADS`).

use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::ops::{ConvOptions, ModuleOps};
use burn::tensor::{Distribution, Tensor};
use segburn_models::nn::kernels::CpuKernels;

/// One convolution of the step: input `[N, C, H, W]`, output channels, square kernel, stride.
struct Layer {
    name: &'static str,
    input: [usize; 4],
    out_channels: usize,
    kernel: usize,
    stride: usize,
}

const fn layer(
    name: &'static str,
    input: [usize; 4],
    out_channels: usize,
    kernel: usize,
    stride: usize,
) -> Layer {
    Layer {
        name,
        input,
        out_channels,
        kernel,
        stride,
    }
}

const LAYERS: [Layer; 6] = [
    layer("stem conv1.0 3->32 s2", [2, 3, 512, 512], 32, 3, 2),
    layer("stem conv1.3 32->32 s2", [2, 32, 256, 256], 32, 3, 2),
    layer("layer1 3x3 32->32", [2, 32, 128, 128], 32, 3, 1),
    layer("layer3 3x3 64->64 (1/8)", [2, 64, 64, 64], 64, 3, 1),
    layer("layer5 1x1 256->512 (1/32)", [2, 256, 16, 16], 512, 1, 1),
    layer("seghead_d 1x1 32->1", [2, 32, 64, 64], 1, 1, 1),
];

fn median_ms(mut run: impl FnMut()) -> f64 {
    run();
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

pub fn run() -> anyhow::Result<()> {
    let device = Default::default();
    println!("conv2d on Flex, f32, ms (median of 5): ours | Burn 0.21 | Burn / ours");
    let mut totals = [[0.0f64; 2]; 3];
    for Layer {
        name,
        input,
        out_channels,
        kernel,
        stride,
    } in LAYERS
    {
        let normal = Distribution::Normal(0.0, 1.0);
        let x = Tensor::<Flex, 4>::random(input, normal, &device);
        let weight_shape = [out_channels, input[1], kernel, kernel];
        let weight = Tensor::<Flex, 4>::random(weight_shape, normal, &device);
        let options = ConvOptions::new([stride; 2], [kernel / 2; 2], [1, 1], 1);
        let out = burn::tensor::module::conv2d(x.clone(), weight.clone(), None, options.clone());
        let grad = Tensor::<Flex, 4>::random(out.dims(), normal, &device);
        let (x, w, g) = (
            x.into_primitive().tensor(),
            weight.into_primitive().tensor(),
            grad.into_primitive().tensor(),
        );
        let o = &options;
        let pairs: [(&str, [f64; 2]); 3] = [
            (
                "forward",
                [
                    median_ms(|| drop(Flex::conv2d_forward(x.clone(), w.clone(), o.clone()))),
                    median_ms(|| drop(Flex::conv2d(x.clone(), w.clone(), None, o.clone()))),
                ],
            ),
            (
                "input grad",
                [
                    median_ms(|| {
                        drop(Flex::conv2d_input_grad(
                            x.clone(),
                            w.clone(),
                            g.clone(),
                            o.clone(),
                        ))
                    }),
                    median_ms(|| {
                        drop(Flex::conv2d_x_backward(
                            x.clone(),
                            w.clone(),
                            g.clone(),
                            o.clone(),
                        ))
                    }),
                ],
            ),
            (
                "weight grad",
                [
                    median_ms(|| {
                        drop(Flex::conv2d_weight_grad(
                            x.clone(),
                            w.clone(),
                            g.clone(),
                            o.clone(),
                        ))
                    }),
                    median_ms(|| {
                        drop(Flex::conv2d_weight_backward(
                            x.clone(),
                            w.clone(),
                            g.clone(),
                            o.clone(),
                        ))
                    }),
                ],
            ),
        ];
        for (i, (what, [ours, burn])) in pairs.iter().enumerate() {
            totals[i][0] += ours;
            totals[i][1] += burn;
            println!(
                "{name:<28} {what:<12} {ours:>9.2} | {burn:>9.2} | {:.2}x",
                burn / ours
            );
        }
    }
    for (what, [ours, burn]) in ["forward", "input grad", "weight grad"].iter().zip(totals) {
        println!(
            "{:<28} {what:<12} {ours:>9.2} | {burn:>9.2} | {:.2}x",
            "all six",
            burn / ours
        );
    }
    Ok(())
}

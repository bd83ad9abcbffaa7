//! `cargo xtask bench-kernels`: segburn's CPU kernels (the convolution's forward, input and
//! weight gradients; the bilinear resize's forward and input gradient) against the Burn ops
//! they replace, on the shapes of a PIDNet-S training step at 2×3×512×512 (and the loss's
//! upsampling of a 1024×512 crop), in one run (median of 5 after one warm-up each; the resize
//! rows alternate ours and Burn's run by run). Both run on Flex's compute pool
//! (`RAYON_NUM_THREADS`).

use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::ops::{ConvOptions, InterpolateMode, InterpolateOptions, ModuleOps};
use burn::tensor::{Distribution, Tensor};
use segburn_kernels::{ConvKernels, ResizeKernels};

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
    let mut totals = ["forward", "input grad", "weight grad"].map(|what| (what, [0.0f64; 2]));
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
                    median_ms(|| drop(Flex::conv2d_forward(x.clone(), w.clone(), None, o.clone()))),
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
        print_rows(name, &pairs, &mut totals);
    }
    print_rows("all six", &totals, &mut []);
    bilinear_rows();
    Ok(())
}

/// One bilinear resize of the step: input `[N, C, H, W]`, output size, corner convention.
struct Resize {
    name: &'static str,
    input: [usize; 4],
    size: [usize; 2],
    align_corners: bool,
}

const fn resize(
    name: &'static str,
    input: [usize; 4],
    size: [usize; 2],
    align_corners: bool,
) -> Resize {
    Resize {
        name,
        input,
        size,
        align_corners,
    }
}

const RESIZES: [Resize; 6] = [
    resize("loss logits 1/8->1 (ac)", [2, 19, 64, 64], [512, 512], true),
    resize(
        "loss 1024x512 crop (ac)",
        [2, 19, 64, 128],
        [512, 1024],
        true,
    ),
    resize(
        "loss boundary 1/8->1 (ac)",
        [2, 1, 64, 64],
        [512, 512],
        true,
    ),
    resize("pag/diff 1/16->1/8", [2, 64, 32, 32], [64, 64], false),
    resize("64 ch 64->128", [2, 64, 64, 64], [128, 128], false),
    resize("pappm branch 1/64", [2, 96, 2, 2], [8, 8], false),
];

/// Medians of 5 runs of `ours` and `burn`, alternated (after one warm-up each), so that a
/// change of the machine's load hits both alike.
fn alternated_median_ms(mut ours: impl FnMut(), mut burn: impl FnMut()) -> [f64; 2] {
    let time = |run: &mut dyn FnMut()| {
        let start = Instant::now();
        run();
        start.elapsed().as_secs_f64() * 1e3
    };
    ours();
    burn();
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..5 {
        times[0].push(time(&mut ours));
        times[1].push(time(&mut burn));
    }
    times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[2]
    })
}

fn bilinear_rows() {
    let device = Default::default();
    println!("bilinear resize on Flex, f32, ms (median of 5, alternated): ours | Burn 0.21 | Burn / ours");
    let mut totals = ["forward", "input grad"].map(|what| (what, [0.0f64; 2]));
    for Resize {
        name,
        input,
        size,
        align_corners,
    } in RESIZES
    {
        let normal = Distribution::Normal(0.0, 1.0);
        let x = Tensor::<Flex, 4>::random(input, normal, &device);
        let [n, c, ..] = input;
        let grad = Tensor::<Flex, 4>::random([n, c, size[0], size[1]], normal, &device);
        let (x, g) = (x.into_primitive().tensor(), grad.into_primitive().tensor());
        let options =
            InterpolateOptions::new(InterpolateMode::Bilinear).with_align_corners(align_corners);
        let o = &options;
        let pairs = [
            (
                "forward",
                alternated_median_ms(
                    || drop(Flex::bilinear_forward(x.clone(), size, align_corners)),
                    || drop(Flex::interpolate(x.clone(), size, o.clone())),
                ),
            ),
            (
                "input grad",
                alternated_median_ms(
                    || drop(Flex::bilinear_input_grad(input, g.clone(), align_corners)),
                    || {
                        drop(Flex::interpolate_backward(
                            x.clone(),
                            g.clone(),
                            size,
                            o.clone(),
                        ))
                    },
                ),
            ),
        ];
        print_rows(name, &pairs, &mut totals);
    }
    print_rows("all six", &totals, &mut []);
}

/// Prints one line per `(what, [ours, Burn's])` and adds the times to `totals` (by name).
fn print_rows(
    name: &str,
    rows: &[(&'static str, [f64; 2])],
    totals: &mut [(&'static str, [f64; 2])],
) {
    for (what, [ours, burn]) in rows {
        if let Some((_, total)) = totals.iter_mut().find(|(w, _)| w == what) {
            total[0] += ours;
            total[1] += burn;
        }
        println!(
            "{name:<28} {what:<12} {ours:>9.2} | {burn:>9.2} | {:.2}x",
            burn / ours
        );
    }
}

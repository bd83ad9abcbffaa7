//! Time spent in each stage of PIDNet's eval forward on Flex (Flex runs eagerly, so the time
//! between two consecutive taps is the time of the stage in between).
//! `cargo run --release -p segburn-models --example pidnet_profile -- [s|m|l] [H W]`

use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use segburn_models::pidnet::{PidNetConfig, PidNetSize};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let size = match args.get(1).map(String::as_str) {
        Some("m") => PidNetSize::M,
        Some("l") => PidNetSize::L,
        _ => PidNetSize::S,
    };
    let h: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(512);
    let w: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let device = Default::default();
    let model = PidNetConfig::new(size, 19).init::<Flex>(&device);
    let x = Tensor::<Flex, 4>::random([1, 3, h, w], Distribution::Default, &device);
    let _ = model.forward(x.clone()).map(|o| o.main.into_data());
    let mut stages: Vec<(&'static str, f64)> = Vec::new();
    let start = Instant::now();
    let mut last = Instant::now();
    let _ = model.forward_tapped(x, &mut |name, _| {
        stages.push((name, last.elapsed().as_secs_f64() * 1e3));
        last = Instant::now();
    });
    let total = start.elapsed().as_secs_f64() * 1e3;
    println!("PIDNet-{size:?} eval forward at 1x3x{h}x{w}: {total:.1} ms");
    for (name, ms) in stages {
        println!("  {name:<14} {ms:8.1} ms  {:5.1} %", 100.0 * ms / total);
    }
}

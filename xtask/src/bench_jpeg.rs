//! `cargo xtask bench-loader --only jpeg`: JPEG decoding by segburn (libjpeg-turbo, what
//! OpenCV and Pillow decode with) against the `image` crate's decoder (zune-jpeg), which
//! segburn used before its pixels matched OpenCV's, on the same files in one run.
//!
//! The files are the benchmark's noisy street scenes, written as 4:2:0 JPEGs at quality 90
//! (the subsampling of Pascal VOC's and ADE20K's photos).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use segburn::bench::throughput::process_cpu_seconds;

use crate::scene::Scene;

/// Writes `scene` as a 4:2:0 JPEG.
pub fn write(path: &Path, width: usize, height: usize, scene: &Scene) -> anyhow::Result<()> {
    let mut encoder = jpeg_encoder::Encoder::new_file(path, 90)
        .with_context(|| format!("cannot create {}", path.display()))?;
    encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_2_0);
    let (w, h) = (u16::try_from(width)?, u16::try_from(height)?);
    encoder
        .encode(&scene.rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Wall and CPU seconds of `epochs` passes of `decode` over `files`.
fn time(
    files: &[PathBuf],
    epochs: u64,
    decode: impl Fn(&Path) -> anyhow::Result<usize>,
) -> anyhow::Result<(f64, Option<f64>)> {
    let (wall, cpu) = (Instant::now(), process_cpu_seconds());
    let mut pixels = 0;
    for _ in 0..epochs {
        for file in files {
            pixels += decode(file)?;
        }
    }
    anyhow::ensure!(pixels > 0, "nothing decoded");
    let cpu = process_cpu_seconds().zip(cpu).map(|(now, then)| now - then);
    Ok((wall.elapsed().as_secs_f64(), cpu))
}

/// Times both decoders, alternating `rounds` times, and prints images per CPU-second.
pub fn compare(files: &[PathBuf], epochs: u64, rounds: usize) -> anyhow::Result<()> {
    let segburn = |path: &Path| -> anyhow::Result<usize> {
        Ok(segburn_data::decode::read_image(path)?.pixels.len())
    };
    let image_crate = |path: &Path| -> anyhow::Result<usize> {
        let bytes = std::fs::read(path)?;
        Ok(image::load_from_memory(&bytes)?.to_rgb8().len())
    };
    let images = files.len() as f64 * epochs as f64;
    let rate = |(wall, cpu): (f64, Option<f64>)| images / cpu.filter(|c| *c > 0.0).unwrap_or(wall);
    for round in 1..=rounds {
        let ours = rate(time(files, epochs, segburn)?);
        let before = rate(time(files, epochs, image_crate)?);
        println!(
            "jpeg decode, round {round}: libjpeg-turbo {ours:.2} images per CPU-second, \
             image crate (zune-jpeg, before) {before:.2}: {:.2}x",
            ours / before
        );
    }
    Ok(())
}

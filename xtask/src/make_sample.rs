//! `cargo xtask make-sample`: the bundled Cityscapes-layout sample dataset in `datasets/sample/`.
//!
//! 48 training and 12 validation street scenes at 256x512 (h x w), drawn procedurally
//! (see `scene.rs`) with their `gtFine_labelIds`. The output is a pure function of the code:
//! running it again rewrites identical files.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::{png_file, scene};

/// Splits as `(split, city, images)`: two training cities, one validation city.
const SPLITS: [(&str, &str, usize); 3] = [
    ("train", "ashford", 24),
    ("train", "brightwater", 24),
    ("val", "coldharbour", 12),
];
const WIDTH: usize = 512;
const HEIGHT: usize = 256;
/// Sensor grain: amplitude, and on one pixel in how many. Sparse, so 60 scenes stay under ~6 MB.
const GRAIN: f32 = 8.0;
const SPECKLE_EVERY: u64 = 40;
/// The base seed of the sample dataset; scene `k` uses `mix(SEED + k)`.
const SEED: u64 = 0x5e6b_0a11_5a3d_1e00;

pub fn run(out: &Path) -> anyhow::Result<()> {
    for folder in ["leftImg8bit", "gtFine"] {
        let stale = out.join(folder);
        if stale.exists() {
            std::fs::remove_dir_all(&stale)
                .with_context(|| format!("cannot remove {}", stale.display()))?;
        }
    }
    let mut scene_number = 0u64;
    let mut total_bytes = 0u64;
    for (split, city, count) in SPLITS {
        for frame in 0..count {
            let seed = segburn_data::rng::mix(SEED.wrapping_add(scene_number));
            scene_number += 1;
            let scene = scene::draw(seed, WIDTH, HEIGHT, GRAIN, SPECKLE_EVERY);
            let stem = format!("{city}_{:06}_{:06}", frame, 19);
            let image = out
                .join("leftImg8bit")
                .join(split)
                .join(city)
                .join(format!("{stem}_leftImg8bit.png"));
            let label = out
                .join("gtFine")
                .join(split)
                .join(city)
                .join(format!("{stem}_gtFine_labelIds.png"));
            png_file::write(&image, WIDTH, HEIGHT, 3, &scene.rgb)?;
            png_file::write(&label, WIDTH, HEIGHT, 1, &scene.label)?;
            total_bytes += file_size(&image)? + file_size(&label)?;
        }
    }
    println!(
        "wrote {scene_number} scenes ({:.2} MB) to {}",
        total_bytes as f64 / 1e6,
        out.display()
    );
    Ok(())
}

fn file_size(path: &PathBuf) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len())
}

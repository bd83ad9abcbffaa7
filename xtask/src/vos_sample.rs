//! `cargo xtask make-sample`: the bundled VOS sample in `datasets/sample_vos/`, in the DAVIS
//! layout (`JPEGImages/<video>/00000.jpg`, palette `Annotations/<video>/00000.png`,
//! `ImageSets/{train,val}.txt`).
//!
//! Four videos of 10 frames at 128x96 (w x h): textured ellipses and rectangles over a
//! panning textured background, 1 to 3 objects each, moving in straight lines; in `crossing`
//! one object passes in front of another, in `exit` one leaves the frame, in `occluder` one
//! disappears behind a larger one and comes out again. Motion is hand-written and textures are
//! seeded noise, so the files are a pure function of the code (the JPEG encoder is pure Rust).

use std::path::Path;

use anyhow::Context;
use segburn_data::rng::mix;

use crate::png_file;
use crate::scene::canvas::{shade, value_noise};

pub const WIDTH: usize = 128;
pub const HEIGHT: usize = 96;
pub const FRAMES: usize = 10;
const SEED: u64 = 0x0005_a3d0_2d00_7105;

#[derive(Clone, Copy)]
enum Shape {
    Ellipse,
    Rect,
}

/// One object: where it is at frame 0, how far it moves per frame, its half sizes and look.
struct Thing {
    shape: Shape,
    centre: (f32, f32),
    velocity: (f32, f32),
    half: (f32, f32),
    colour: [f32; 3],
}

impl Thing {
    const fn new(
        shape: Shape,
        centre: (f32, f32),
        velocity: (f32, f32),
        half: (f32, f32),
        colour: [f32; 3],
    ) -> Self {
        Self {
            shape,
            centre,
            velocity,
            half,
            colour,
        }
    }

    fn covers(&self, t: usize, x: f32, y: f32) -> bool {
        let cx = self.centre.0 + self.velocity.0 * t as f32;
        let cy = self.centre.1 + self.velocity.1 * t as f32;
        let (dx, dy) = ((x - cx) / self.half.0, (y - cy) / self.half.1);
        match self.shape {
            Shape::Ellipse => dx * dx + dy * dy <= 1.0,
            Shape::Rect => dx.abs() <= 1.0 && dy.abs() <= 1.0,
        }
    }
}

use Shape::{Ellipse, Rect};

/// The videos as `(split, name, things)`; a thing's object id is its position + 1, and later
/// things are drawn in front of earlier ones.
fn videos() -> [(&'static str, &'static str, Vec<Thing>); 4] {
    [
        (
            "train",
            "crossing",
            vec![
                Thing::new(
                    Ellipse,
                    (20.0, 40.0),
                    (9.0, 0.5),
                    (14.0, 10.0),
                    [200.0, 60.0, 50.0],
                ),
                Thing::new(
                    Rect,
                    (110.0, 50.0),
                    (-8.0, -0.5),
                    (10.0, 14.0),
                    [230.0, 200.0, 60.0],
                ),
                Thing::new(
                    Ellipse,
                    (64.0, 82.0),
                    (0.0, -1.0),
                    (7.0, 7.0),
                    [150.0, 80.0, 190.0],
                ),
            ],
        ),
        (
            "train",
            "drift",
            vec![
                Thing::new(
                    Ellipse,
                    (30.0, 30.0),
                    (4.0, 2.0),
                    (16.0, 11.0),
                    [60.0, 170.0, 80.0],
                ),
                Thing::new(
                    Rect,
                    (96.0, 24.0),
                    (-3.0, 4.0),
                    (12.0, 9.0),
                    [60.0, 90.0, 210.0],
                ),
            ],
        ),
        (
            "train",
            "exit",
            vec![
                Thing::new(
                    Rect,
                    (70.0, 36.0),
                    (9.0, 0.0),
                    (13.0, 10.0),
                    [240.0, 140.0, 40.0],
                ),
                Thing::new(
                    Ellipse,
                    (40.0, 78.0),
                    (1.0, -4.0),
                    (10.0, 12.0),
                    [60.0, 200.0, 210.0],
                ),
            ],
        ),
        (
            "val",
            "occluder",
            vec![
                Thing::new(
                    Ellipse,
                    (22.0, 50.0),
                    (9.0, 0.0),
                    (11.0, 9.0),
                    [210.0, 70.0, 150.0],
                ),
                Thing::new(
                    Ellipse,
                    (100.0, 22.0),
                    (1.0, -3.0),
                    (8.0, 8.0),
                    [120.0, 220.0, 90.0],
                ),
                Thing::new(
                    Rect,
                    (66.0, 52.0),
                    (0.0, 0.0),
                    (15.0, 18.0),
                    [140.0, 110.0, 80.0],
                ),
            ],
        ),
    ]
}

/// The DAVIS palette (Pascal VOC's colour map), as the palette PNGs store it: RGB triples.
pub fn davis_palette() -> Vec<u8> {
    segburn_data::pascal_voc_palette(256).concat()
}

/// Frame `t` of a video: RGB and object ids, row-major.
fn draw(seed: u64, things: &[Thing], t: usize) -> (Vec<u8>, Vec<u8>) {
    let mut rgb = Vec::with_capacity(WIDTH * HEIGHT * 3);
    let mut ids = vec![0u8; WIDTH * HEIGHT];
    for y in 0..HEIGHT {
        for x in 0..WIDTH {
            let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
            // The camera pans right by 2 px per frame.
            let bx = px + 2.0 * t as f32;
            let ground = 0.35 + 0.3 * py / HEIGHT as f32;
            let base = [
                90.0 * ground + 40.0,
                110.0 * ground + 40.0,
                80.0 * ground + 50.0,
            ];
            let mut colour = shade(base, 40.0 * value_noise(seed, bx, py, 12.0));
            for (index, thing) in things.iter().enumerate() {
                if thing.covers(t, px, py) {
                    // Texture moves with the object: sample it in the object's own frame.
                    let ox = px - thing.velocity.0 * t as f32;
                    let oy = py - thing.velocity.1 * t as f32;
                    let texture = value_noise(mix(seed ^ index as u64), ox, oy, 4.0);
                    let stripes = if (ox as i32 / 4) % 2 == 0 {
                        12.0
                    } else {
                        -12.0
                    };
                    colour = shade(thing.colour, 30.0 * texture + stripes);
                    ids[y * WIDTH + x] = index as u8 + 1;
                }
            }
            rgb.extend(colour.iter().map(|&c| c.round().clamp(0.0, 255.0) as u8));
        }
    }
    (rgb, ids)
}

fn write_jpeg(path: &Path, rgb: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let encoder = jpeg_encoder::Encoder::new_file(path, 92)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let (w, h) = (u16::try_from(WIDTH)?, u16::try_from(HEIGHT)?);
    encoder
        .encode(rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes the sample to `out`, replacing what an earlier run wrote; returns the bytes written.
pub fn run(out: &Path) -> anyhow::Result<u64> {
    for folder in ["JPEGImages", "Annotations", "ImageSets"] {
        let stale = out.join(folder);
        if stale.exists() {
            std::fs::remove_dir_all(&stale)
                .with_context(|| format!("cannot remove {}", stale.display()))?;
        }
    }
    let palette = davis_palette();
    let mut total = 0u64;
    let mut splits: [(&str, Vec<&str>); 2] = [("train", Vec::new()), ("val", Vec::new())];
    for (number, (split, name, things)) in videos().iter().enumerate() {
        let seed = mix(SEED.wrapping_add(number as u64));
        for t in 0..FRAMES {
            let (rgb, ids) = draw(seed, things, t);
            let image = out
                .join("JPEGImages")
                .join(name)
                .join(format!("{t:05}.jpg"));
            let label = out
                .join("Annotations")
                .join(name)
                .join(format!("{t:05}.png"));
            write_jpeg(&image, &rgb)?;
            png_file::write_indexed(&label, WIDTH, HEIGHT, &palette, &ids)?;
            total += file_size(&image)? + file_size(&label)?;
        }
        if let Some((_, names)) = splits.iter_mut().find(|(s, _)| s == split) {
            names.push(name);
        }
    }
    for (split, names) in splits {
        let list = out.join("ImageSets").join(format!("{split}.txt"));
        if let Some(parent) = list.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let text: String = names.iter().map(|name| format!("{name}\n")).collect();
        std::fs::write(&list, text).with_context(|| format!("cannot write {}", list.display()))?;
        total += file_size(&list)?;
    }
    Ok(total)
}

fn file_size(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len())
}

#[cfg(test)]
mod tests;

//! Procedural street scenes with Cityscapes labelIds, for the sample dataset and the loader
//! benchmark.
//!
//! A scene is a one-point-perspective street: sky, a row of buildings (or trees) on each side
//! whose roofs and bases converge on the vanishing point, sidewalks, the road with lane marks,
//! then poles with signs, people and cars from far to near, and sometimes the ego car's hood.
//! Each class keeps one look everywhere (colour family and texture), so a small network can
//! learn it. Everything is a pure function of the seed, through segburn-data's own SplitMix64,
//! so the files never change with a dependency update.

pub mod canvas;
pub mod id;
mod things;

use segburn_data::rng::{mix, SplitMix64};

use canvas::{hash_noise, shade, value_noise, Canvas};
use things::{draw_things, Street};

/// An RGB image and its labelIds, row-major.
pub struct Scene {
    pub rgb: Vec<u8>,
    pub label: Vec<u8>,
}

/// Draws the scene of `seed` at `width x height`. `grain` is the amplitude of the sensor noise
/// added at the end, on one pixel in `speckle_every` (1: every pixel, as the benchmark does to
/// make large, slow-to-decode PNGs; the sample dataset uses sparse speckles, because dense noise
/// would triple its size).
pub fn draw(seed: u64, width: usize, height: usize, grain: f32, speckle_every: u64) -> Scene {
    let mut rng = SplitMix64::new(seed);
    let mut uniform = move |low: f32, high: f32| {
        low + (high - low) * ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    };
    let (w, h) = (width as f32, height as f32);
    let s = w / 512.0; // all sizes are designed at 512 px wide
    let mut canvas = Canvas {
        width,
        height,
        rgb: vec![[0.0; 3]; width * height],
        label: vec![id::SKY; width * height],
    };
    let horizon = h * uniform(0.36, 0.46);
    let vx = w * uniform(0.4, 0.6);
    let noise_seed = mix(seed ^ 0x7465_7874);

    // Sky: a vertical gradient with soft clouds.
    let cloudiness = uniform(0.0, 1.0);
    canvas.rect((0.0, 0.0, w, h), id::SKY, |x, y| {
        let t = y / horizon.max(1.0);
        let base = [110.0 + 70.0 * t, 150.0 + 55.0 * t, 205.0 + 25.0 * t];
        let cloud =
            (value_noise(noise_seed ^ 1, x, y * 2.0, 40.0 * s) - 0.6 + cloudiness * 0.5).max(0.0);
        shade(base, cloud * 160.0)
    });

    // Ground: road between the two near edges, sidewalks outside it, façades beyond.
    let road_left = w * uniform(-0.1, 0.15);
    let road_right = w * uniform(0.85, 1.1);
    let walk = w * uniform(0.25, 0.4);
    let street = Street {
        horizon,
        height: h,
        vanishing_x: vx,
        road_left,
        road_right,
        walk,
        scale: s,
        noise_seed,
    };
    let line_x = |bottom_x: f32, y: f32| street.line_x(bottom_x, y);
    let asphalt = uniform(75.0, 95.0);
    canvas.fill(
        (0.0, horizon, w, h),
        id::ROAD,
        |_, _| true,
        |x, y| {
            let grain = value_noise(noise_seed ^ 2, x, y, 2.0 * s) * 7.0;
            shade([asphalt, asphalt, asphalt + 5.0], grain)
        },
    );
    // Dashed centre line, in perspective.
    canvas.fill(
        (0.0, horizon, w, h),
        id::ROAD,
        |x, y| {
            let depth = (y - horizon) / (h - horizon);
            let centre = line_x((road_left + road_right) / 2.0, y);
            let half = 3.0 * s * depth + 0.3;
            (x - centre).abs() < half && ((1.0 / (depth + 0.05)) * 3.0).fract() < 0.5
        },
        |_, _| [215.0, 215.0, 205.0],
    );
    for (near, far) in [
        (road_left, road_left - walk),
        (road_right, road_right + walk),
    ] {
        canvas.fill(
            (0.0, horizon, w, h),
            id::SIDEWALK,
            |x, y| {
                let (a, b) = (line_x(near, y), line_x(far, y));
                x >= a.min(b) && x < a.max(b)
            },
            |x, y| {
                // Paving slabs: darker joints on a screen-space grid.
                let joint = (x % (14.0 * s)) < 1.2 * s || (y % (9.0 * s)) < 1.0 * s;
                let base = if joint { 130.0 } else { 168.0 };
                shade(
                    [base, base - 8.0, base - 18.0],
                    value_noise(noise_seed ^ 3, x, y, 6.0 * s) * 6.0,
                )
            },
        );
    }

    // Beyond each sidewalk: hedges, seen where a tree stands instead of a building.
    for outer in [road_left - walk, road_right + walk] {
        canvas.fill(
            (0.0, horizon, w, h),
            id::VEGETATION,
            |x, y| {
                let edge = line_x(outer, y);
                if outer < vx {
                    x < edge
                } else {
                    x >= edge
                }
            },
            |x, y| {
                let leaves = value_noise(noise_seed ^ 5, x, y, 3.0 * s) * 28.0;
                [62.0 + leaves, 118.0 + leaves, 38.0 + leaves * 0.5]
            },
        );
    }

    // Buildings and trees on both sides, roofs and bases converging on the vanishing point.
    let walls = [
        [190.0, 168.0, 138.0],
        [150.0, 82.0, 62.0],
        [128.0, 128.0, 134.0],
        [208.0, 198.0, 168.0],
        [118.0, 92.0, 72.0],
    ];
    for (side, outer) in [(-1.0f32, road_left - walk), (1.0, road_right + walk)] {
        let mut x = vx;
        while (side < 0.0 && x > 0.0) || (side > 0.0 && x < w) {
            let span = w * uniform(0.05, 0.2);
            let next = x + side * span;
            let (a, b) = (x.min(next), x.max(next));
            let rise = uniform(0.3, 1.6);
            let base_at = |x: f32| horizon + (h - horizon) * (x - vx) / (outer - vx);
            let roof_at = move |x: f32| horizon - rise * (x - vx).abs() - 6.0 * s;
            if uniform(0.0, 1.0) < 0.75 {
                let wall = walls[(uniform(0.0, 5.0) as usize).min(4)];
                let (cell_w, cell_h) = (uniform(14.0, 22.0) * s, uniform(16.0, 24.0) * s);
                canvas.fill(
                    (a, 0.0, b, h),
                    id::BUILDING,
                    |x, y| y >= roof_at(x) && y < base_at(x),
                    |x, y| {
                        let (wx, wy) = ((x - a) % cell_w / cell_w, (y % cell_h) / cell_h);
                        let window = (0.25..0.75).contains(&wx) && (0.2..0.7).contains(&wy);
                        let tone = value_noise(noise_seed ^ 4, x, y, 5.0 * s) * 9.0;
                        if window {
                            shade([52.0, 62.0, 78.0], tone)
                        } else {
                            shade(wall, tone)
                        }
                    },
                );
            } else {
                // A tree: trunk and a lumpy crown standing on the sidewalk's outer edge.
                let foot = (a + b) / 2.0;
                let depth = ((base_at(foot) - horizon) / (h - horizon)).clamp(0.05, 1.0);
                let crown = span * 0.6;
                let top = base_at(foot) - crown * 2.6;
                canvas.rect(
                    (
                        foot - 3.0 * s * depth,
                        top,
                        foot + 3.0 * s * depth,
                        base_at(foot),
                    ),
                    id::VEGETATION,
                    |_, _| [82.0, 64.0, 44.0],
                );
                for lump in 0..5 {
                    let (dx, dy) = (uniform(-0.5, 0.5) * crown, uniform(-0.4, 0.4) * crown);
                    let r = crown * uniform(0.45, 0.7);
                    let _ = lump;
                    canvas.ellipse((foot + dx, top + dy, r, r * 0.9), id::VEGETATION, |x, y| {
                        let leaves = value_noise(noise_seed ^ 5, x, y, 3.0 * s) * 28.0;
                        [62.0 + leaves, 118.0 + leaves, 38.0 + leaves * 0.5]
                    });
                }
            }
            x = next;
        }
    }

    // Things on the street, far to near.
    draw_things(&mut canvas, &street, &mut uniform);

    // Sometimes the ego car's hood at the bottom (labelId 1, ignored in training).
    if uniform(0.0, 1.0) < 0.4 {
        let depth = h * uniform(0.05, 0.1);
        canvas.fill(
            (0.0, h - depth * 1.5, w, h),
            id::EGO_VEHICLE,
            |x, y| y > h - depth + ((x - w / 2.0) / (w / 2.0)).powi(2) * depth * 0.5,
            |_, y| [28.0 + (h - y) * 0.2, 28.0, 32.0],
        );
    }

    let mut rgb = Vec::with_capacity(width * height * 3);
    for (i, colour) in canvas.rgb.iter().enumerate() {
        let (x, y) = ((i % width) as i64, (i / width) as i64);
        let speckled = grain > 0.0
            && (speckle_every <= 1
                || mix(noise_seed ^ mix((x << 20 ^ y) as u64)).is_multiple_of(speckle_every));
        for (c, value) in colour.iter().enumerate() {
            let noise = if speckled {
                hash_noise(noise_seed ^ (c as u64 + 10), x, y) * grain
            } else {
                0.0
            };
            rgb.push((value + noise).round().clamp(0.0, 255.0) as u8);
        }
    }
    Scene {
        rgb,
        label: canvas.label,
    }
}

#[cfg(test)]
mod tests;

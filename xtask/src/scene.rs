//! Procedural street scenes with Cityscapes labelIds, for the sample dataset and the loader
//! benchmark.
//!
//! A scene is a one-point-perspective street: sky, a row of buildings (or trees) on each side
//! whose roofs and bases converge on the vanishing point, sidewalks, the road with lane marks,
//! then poles with signs, people and cars from far to near, and sometimes the ego car's hood.
//! Each class keeps one look everywhere (colour family and texture), so a small network can
//! learn it. Everything is a pure function of the seed, through segburn-data's own SplitMix64,
//! so the files never change with a dependency update.

use segburn_data::rng::{mix, SplitMix64};

/// Cityscapes labelIds of the classes drawn (see `CITYSCAPES_LABEL_ID_TO_TRAIN_ID`).
pub mod id {
    pub const EGO_VEHICLE: u8 = 1;
    pub const ROAD: u8 = 7;
    pub const SIDEWALK: u8 = 8;
    pub const BUILDING: u8 = 11;
    pub const POLE: u8 = 17;
    pub const TRAFFIC_SIGN: u8 = 20;
    pub const VEGETATION: u8 = 21;
    pub const SKY: u8 = 23;
    pub const PERSON: u8 = 24;
    pub const CAR: u8 = 26;
}

/// An RGB image and its labelIds, row-major.
pub struct Scene {
    pub rgb: Vec<u8>,
    pub label: Vec<u8>,
}

/// Deterministic per-pixel noise in `-1.0..1.0`.
fn hash_noise(seed: u64, x: i64, y: i64) -> f32 {
    let h = mix(seed ^ mix((x as u64) << 32 ^ (y as u64 & 0xFFFF_FFFF)));
    (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// Smooth value noise in `-1.0..1.0` with features about `cell` pixels wide.
fn value_noise(seed: u64, x: f32, y: f32, cell: f32) -> f32 {
    let (gx, gy) = (x / cell, y / cell);
    let (x0, y0) = (gx.floor(), gy.floor());
    let (fx, fy) = (gx - x0, gy - y0);
    // Smoothstep keeps the interpolation free of grid creases.
    let (sx, sy) = (fx * fx * (3.0 - 2.0 * fx), fy * fy * (3.0 - 2.0 * fy));
    let (ix, iy) = (x0 as i64, y0 as i64);
    let corner = |dx: i64, dy: i64| hash_noise(seed, ix + dx, iy + dy);
    let top = corner(0, 0) * (1.0 - sx) + corner(1, 0) * sx;
    let bottom = corner(0, 1) * (1.0 - sx) + corner(1, 1) * sx;
    top * (1.0 - sy) + bottom * sy
}

fn shade(colour: [f32; 3], delta: f32) -> [f32; 3] {
    [colour[0] + delta, colour[1] + delta, colour[2] + delta]
}

struct Canvas {
    width: usize,
    height: usize,
    rgb: Vec<[f32; 3]>,
    label: Vec<u8>,
}

impl Canvas {
    fn put(&mut self, x: i64, y: i64, class: u8, colour: [f32; 3]) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            let at = y as usize * self.width + x as usize;
            self.rgb[at] = colour;
            self.label[at] = class;
        }
    }

    /// Fills the pixels of `[x0, x1) x [y0, y1)` where `inside` holds.
    fn fill(
        &mut self,
        (x0, y0, x1, y1): (f32, f32, f32, f32),
        class: u8,
        inside: impl Fn(f32, f32) -> bool,
        colour: impl Fn(f32, f32) -> [f32; 3],
    ) {
        let (x0, y0) = (x0.floor().max(0.0) as i64, y0.floor().max(0.0) as i64);
        let (x1, y1) = (
            (x1.ceil() as i64).min(self.width as i64),
            (y1.ceil() as i64).min(self.height as i64),
        );
        for y in y0..y1 {
            for x in x0..x1 {
                let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
                if inside(px, py) {
                    self.put(x, y, class, colour(px, py));
                }
            }
        }
    }

    fn rect(&mut self, r: (f32, f32, f32, f32), class: u8, colour: impl Fn(f32, f32) -> [f32; 3]) {
        self.fill(r, class, |_, _| true, colour);
    }

    fn ellipse(
        &mut self,
        (cx, cy, rx, ry): (f32, f32, f32, f32),
        class: u8,
        colour: impl Fn(f32, f32) -> [f32; 3],
    ) {
        self.fill(
            (cx - rx, cy - ry, cx + rx, cy + ry),
            class,
            |x, y| ((x - cx) / rx).powi(2) + ((y - cy) / ry).powi(2) <= 1.0,
            colour,
        );
    }
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
    let line_x = |bottom_x: f32, y: f32| vx + (bottom_x - vx) * (y - horizon) / (h - horizon);
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

    // Things on the street, far to near: (depth, kind, lateral position in 0..1).
    let count = uniform(5.0, 10.0) as usize;
    let mut things: Vec<(f32, u32, f32)> = (0..count)
        .map(|_| {
            (
                uniform(0.12, 1.0),
                uniform(0.0, 3.0) as u32,
                uniform(0.0, 1.0),
            )
        })
        .collect();
    things.sort_by(|p, q| p.0.total_cmp(&q.0));
    for (depth, kind, lateral) in things {
        let ground = horizon + depth * (h - horizon);
        let (left, right) = (line_x(road_left, ground), line_x(road_right, ground));
        match kind {
            0 => {
                // A car on the road.
                let car_w = 150.0 * s * depth;
                let car_h = car_w * 0.5;
                let cx = left + (right - left) * (0.2 + 0.6 * lateral);
                let body = [
                    [170.0, 30.0, 35.0],
                    [35.0, 60.0, 150.0],
                    [190.0, 192.0, 196.0],
                    [30.0, 30.0, 34.0],
                    [230.0, 230.0, 226.0],
                ][(uniform(0.0, 5.0) as usize).min(4)];
                let top = ground - car_h;
                canvas.rect(
                    (
                        cx - car_w * 0.5,
                        top + car_h * 0.35,
                        cx + car_w * 0.5,
                        ground - car_h * 0.1,
                    ),
                    id::CAR,
                    |x, y| {
                        shade(
                            body,
                            value_noise(noise_seed ^ 6, x, y, 8.0 * s) * 6.0
                                + (y - top) / car_h * -25.0,
                        )
                    },
                );
                canvas.rect(
                    (
                        cx - car_w * 0.32,
                        top,
                        cx + car_w * 0.32,
                        top + car_h * 0.36,
                    ),
                    id::CAR,
                    |_, y| shade([60.0, 75.0, 95.0], (y - top) / car_h * 60.0),
                );
                for wheel in [-0.32f32, 0.32] {
                    let r = car_h * 0.17;
                    canvas.ellipse((cx + wheel * car_w, ground - r, r, r), id::CAR, |_, _| {
                        [20.0, 20.0, 22.0]
                    });
                }
            }
            1 => {
                // A person on a sidewalk.
                let on_left = lateral < 0.5;
                let (near, far) = if on_left {
                    (road_left, road_left - walk)
                } else {
                    (road_right, road_right + walk)
                };
                let px = line_x(
                    near + (far - near) * (0.2 + 0.6 * (lateral * 2.0).fract()),
                    ground,
                );
                let tall = 120.0 * s * depth;
                let shirt = [
                    [200.0, 40.0, 40.0],
                    [40.0, 90.0, 170.0],
                    [230.0, 200.0, 60.0],
                    [60.0, 140.0, 70.0],
                ][(uniform(0.0, 4.0) as usize).min(3)];
                canvas.rect(
                    (
                        px - tall * 0.09,
                        ground - tall * 0.48,
                        px + tall * 0.09,
                        ground,
                    ),
                    id::PERSON,
                    |_, _| [40.0, 40.0, 55.0],
                );
                canvas.rect(
                    (
                        px - tall * 0.13,
                        ground - tall * 0.85,
                        px + tall * 0.13,
                        ground - tall * 0.46,
                    ),
                    id::PERSON,
                    |_, _| shirt,
                );
                canvas.ellipse(
                    (px, ground - tall * 0.92, tall * 0.08, tall * 0.08),
                    id::PERSON,
                    |_, _| [222.0, 182.0, 150.0],
                );
            }
            _ => {
                // A pole with a sign on the outer edge of a sidewalk.
                let outer = if lateral < 0.5 {
                    road_left - walk * 0.15
                } else {
                    road_right + walk * 0.15
                };
                let px = line_x(outer, ground);
                let tall = 260.0 * s * depth;
                let half = (3.0 * s * depth).max(0.8);
                canvas.rect(
                    (px - half, ground - tall, px + half, ground),
                    id::POLE,
                    |_, y| shade([118.0, 120.0, 122.0], ((y * 0.7) % 3.0) * 2.0),
                );
                let r = 16.0 * s * depth;
                let sign = [
                    [215.0, 40.0, 40.0],
                    [40.0, 80.0, 190.0],
                    [235.0, 205.0, 30.0],
                ][(lateral * 6.0) as usize % 3];
                canvas.ellipse((px, ground - tall + r, r, r), id::TRAFFIC_SIGN, |x, y| {
                    let inner =
                        ((x - px).powi(2) + (y - (ground - tall + r)).powi(2)).sqrt() < r * 0.65;
                    if inner {
                        [240.0, 240.0, 240.0]
                    } else {
                        sign
                    }
                });
            }
        }
    }

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
mod tests {
    use super::*;

    #[test]
    fn scenes_are_deterministic_and_use_only_the_drawn_ids() {
        let a = draw(7, 128, 64, 8.0, 40);
        let b = draw(7, 128, 64, 8.0, 40);
        assert_eq!(a.rgb, b.rgb);
        assert_eq!(a.label, b.label);
        assert_ne!(draw(8, 128, 64, 8.0, 40).label, a.label);
        let allowed = [
            id::EGO_VEHICLE,
            id::ROAD,
            id::SIDEWALK,
            id::BUILDING,
            id::POLE,
            id::TRAFFIC_SIGN,
            id::VEGETATION,
            id::SKY,
            id::PERSON,
            id::CAR,
        ];
        assert!(a.label.iter().all(|l| allowed.contains(l)));
        assert_eq!(a.rgb.len(), 128 * 64 * 3);
    }

    #[test]
    fn every_scene_has_sky_road_and_sidewalk() {
        for seed in 0..20 {
            let scene = draw(seed, 128, 64, 0.0, 1);
            for class in [id::SKY, id::ROAD, id::SIDEWALK] {
                assert!(scene.label.contains(&class), "seed {seed} lacks {class}");
            }
        }
    }
}

//! The things on the street: cars on the road, people on the sidewalks, poles with signs on
//! the sidewalks' outer edges, placed at random depths and drawn far to near so that near
//! things cover far ones.

use super::canvas::{shade, value_noise, Canvas};
use super::id;

/// The street the things stand on, in the pixels of the image being drawn. The road's and the
/// sidewalks' edges are lines from the image's bottom edge to the vanishing point.
pub struct Street {
    /// The row of the horizon; the ground lies below it.
    pub horizon: f32,
    /// The image height.
    pub height: f32,
    /// The column of the vanishing point.
    pub vanishing_x: f32,
    /// The road's edges on the bottom row.
    pub road_left: f32,
    pub road_right: f32,
    /// The sidewalks' width on the bottom row.
    pub walk: f32,
    /// The image width over 512, the width every size is designed at.
    pub scale: f32,
    /// The seed of the textures' value noise.
    pub noise_seed: u64,
}

impl Street {
    /// The column, on row `y`, of the edge that meets the bottom row at `bottom_x`.
    pub fn line_x(&self, bottom_x: f32, y: f32) -> f32 {
        self.vanishing_x
            + (bottom_x - self.vanishing_x) * (y - self.horizon) / (self.height - self.horizon)
    }
}

/// Draws 5 to 9 things, `(depth, kind, lateral position in 0..1)` each, drawing from `uniform`
/// in the same order as always so that a seed keeps its scene.
pub fn draw_things(
    canvas: &mut Canvas,
    street: &Street,
    uniform: &mut impl FnMut(f32, f32) -> f32,
) {
    let Street {
        horizon,
        height: h,
        road_left,
        road_right,
        walk,
        scale: s,
        noise_seed,
        ..
    } = *street;
    let line_x = |bottom_x: f32, y: f32| street.line_x(bottom_x, y);
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
}

//! What scenes are drawn with: seeded value noise for textures, and a canvas of RGB colours
//! (kept in `f32` until the final rounding) with the labelId of every pixel.

use segburn_data::rng::mix;

/// Deterministic per-pixel noise in `-1.0..1.0`.
pub fn hash_noise(seed: u64, x: i64, y: i64) -> f32 {
    let h = mix(seed ^ mix((x as u64) << 32 ^ (y as u64 & 0xFFFF_FFFF)));
    (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// Smooth value noise in `-1.0..1.0` with features about `cell` pixels wide.
pub fn value_noise(seed: u64, x: f32, y: f32, cell: f32) -> f32 {
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

/// `colour` lightened (or darkened, for a negative `delta`) on every channel.
pub fn shade(colour: [f32; 3], delta: f32) -> [f32; 3] {
    [colour[0] + delta, colour[1] + delta, colour[2] + delta]
}

/// The scene being drawn: a colour and a labelId per pixel, row-major.
pub struct Canvas {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<[f32; 3]>,
    pub label: Vec<u8>,
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
    pub fn fill(
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

    pub fn rect(
        &mut self,
        r: (f32, f32, f32, f32),
        class: u8,
        colour: impl Fn(f32, f32) -> [f32; 3],
    ) {
        self.fill(r, class, |_, _| true, colour);
    }

    pub fn ellipse(
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

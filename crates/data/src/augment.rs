//! Training augmentation (random scale, pad, random crop, horizontal flip) and normalisation,
//! fused into one pass that computes only the pixels of the crop.
//!
//! # Semantics
//! The result is defined as the official pipeline, step by step:
//! 1. resize the `W x H` image to `W' x H'` (long side `int(base_size * s + 0.5)`, short side
//!    `int(short * long' / long + 0.5)`; no resize without `multi_scale`). The image is
//!    resampled bilinearly like OpenCV's `INTER_LINEAR` for 8-bit images: pixel centres at
//!    `+0.5`, source coordinate `(x + 0.5) * W / W' - 0.5` clamped to the image, 11-bit
//!    fixed-point weights per axis, the result rounded back to 8 bits. Labels and edges use
//!    nearest: source `floor(x * W / W')` in exact integer arithmetic;
//! 2. pad bottom and right up to the crop size (image 0 before normalisation, label the ignore
//!    index, edge 0);
//! 3. crop `crop_width x crop_height` at `(x, y)`, both drawn inclusively from
//!    `0..=padded - crop`;
//! 4. flip horizontally with probability 1/2;
//! 5. normalise each RGB value `v` to `(v / 255 - mean) / std` in f32.
//!
//! Every output pixel depends only on its own coordinates in the resized image, so computing the
//! crop window directly gives exactly the same numbers as resizing everything and cropping
//! afterwards (a test checks this against a literal resize-pad-crop-flip implementation), at a
//! fraction of the cost: a 2x upscale of a 2048x1024 image would otherwise resample 8 million
//! pixels to keep one.

use crate::config::AugmentConfig;
use crate::decode::RgbImage;
use crate::rng::SplitMix64;

/// Fixed-point precision of the bilinear weights (OpenCV's `INTER_RESIZE_COEF_BITS`).
const WEIGHT_BITS: u32 = 11;
const WEIGHT_ONE: u32 = 1 << WEIGHT_BITS;
/// Rounding offset of the two-axis product (weights multiply to 2^22).
const ROUND: u32 = 1 << (2 * WEIGHT_BITS - 1);

/// Where the output pixels come from: the resized size, the crop window and the flip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub source_width: usize,
    pub source_height: usize,
    /// Size after the random resize.
    pub scaled_width: usize,
    pub scaled_height: usize,
    /// Top-left corner of the crop in the resized, padded image.
    pub crop_x: usize,
    pub crop_y: usize,
    /// Output size (the crop size in training, the image size in validation).
    pub width: usize,
    pub height: usize,
    pub flip: bool,
}

impl Geometry {
    /// The whole image, unchanged (validation).
    pub fn identity(width: usize, height: usize) -> Self {
        Self {
            source_width: width,
            source_height: height,
            scaled_width: width,
            scaled_height: height,
            crop_x: 0,
            crop_y: 0,
            width,
            height,
            flip: false,
        }
    }

    /// Draws one training augmentation for a `width x height` image. Always four draws, in the
    /// order scale, crop x, crop y, flip, whatever the configuration switches off, so turning
    /// flip off does not change the crops.
    pub fn draw(width: usize, height: usize, config: &AugmentConfig, rng: &mut SplitMix64) -> Self {
        let step = rng.below(u64::from(config.scale_steps.max(1))) as u32;
        let (scaled_width, scaled_height) = if config.multi_scale {
            scaled_size(width, height, config.base_size, config.scale(step))
        } else {
            (width, height)
        };
        let padded_width = scaled_width.max(config.crop_width);
        let padded_height = scaled_height.max(config.crop_height);
        let crop_x = rng.inclusive(0, (padded_width - config.crop_width) as u64) as usize;
        let crop_y = rng.inclusive(0, (padded_height - config.crop_height) as u64) as usize;
        let flip = rng.coin() && config.flip;
        Self {
            source_width: width,
            source_height: height,
            scaled_width,
            scaled_height,
            crop_x,
            crop_y,
            width: config.crop_width,
            height: config.crop_height,
            flip,
        }
    }

    /// The resized-image column that output column `x` shows.
    fn scaled_column(&self, x: usize) -> usize {
        let within_crop = if self.flip { self.width - 1 - x } else { x };
        self.crop_x + within_crop
    }
}

/// The official `multi_scale_aug` size: long side `int(base * s + 0.5)`, short side scaled to
/// keep the aspect ratio, `int(short * long' / long + 0.5)`, both at least 1 pixel.
pub fn scaled_size(width: usize, height: usize, base_size: usize, scale: f64) -> (usize, usize) {
    let long = ((base_size as f64 * scale + 0.5) as usize).max(1);
    let short_of = |short: usize, long_side: usize| {
        (((short * long) as f64 / long_side as f64 + 0.5) as usize).max(1)
    };
    if height > width {
        (short_of(width, height), long)
    } else {
        (long, short_of(height, width))
    }
}

/// `(v / 255 - mean) / std` for every 8-bit value, per channel, in f32 like the official numpy
/// code (float32 array minus a Python float stays float32).
#[derive(Debug, Clone)]
pub struct Normaliser {
    table: [[f32; 256]; 3],
}

impl Normaliser {
    pub fn new(mean: [f32; 3], std: [f32; 3]) -> Self {
        let mut table = [[0f32; 256]; 3];
        for (channel, values) in table.iter_mut().enumerate() {
            for (v, out) in values.iter_mut().enumerate() {
                *out = (v as f32 / 255.0 - mean[channel]) / std[channel];
            }
        }
        Self { table }
    }

    /// The normalised value of `v` in `channel`.
    pub fn value(&self, channel: usize, v: u8) -> f32 {
        self.table[channel][usize::from(v)]
    }
}

/// One axis of bilinear sampling for an output coordinate: two source taps and their weights.
#[derive(Debug, Clone, Copy)]
struct Tap {
    first: usize,
    second: usize,
    first_weight: u32,
    second_weight: u32,
}

/// OpenCV's `INTER_LINEAR` tap for resized coordinate `d` of an axis resized `source -> scaled`.
fn bilinear_tap(d: usize, source: usize, scaled: usize) -> Tap {
    let ratio = source as f64 / scaled as f64;
    let f = (d as f64 + 0.5) * ratio - 0.5;
    let mut first = f.floor();
    let mut fraction = f - first;
    if first < 0.0 {
        first = 0.0;
        fraction = 0.0;
    }
    let mut first = first as usize;
    if first >= source - 1 {
        first = source - 1;
        fraction = 0.0;
    }
    let first_weight = ((1.0 - fraction) * f64::from(WEIGHT_ONE)).round() as u32;
    Tap {
        first,
        second: (first + 1).min(source - 1),
        first_weight,
        second_weight: WEIGHT_ONE - first_weight,
    }
}

/// OpenCV's `INTER_NEAREST` source index, `floor(d * source / scaled)`, exactly.
fn nearest(d: usize, source: usize, scaled: usize) -> usize {
    (d * source / scaled).min(source - 1)
}

/// Where one sample's outputs go: planar `[3, H, W]` image and `[H, W]` label and edges.
pub struct SampleSlot<'a> {
    pub image: &'a mut [f32],
    pub label: &'a mut [u8],
    pub edges: &'a mut [u8],
}

/// Renders the output window of `geometry` from the decoded image, label and edges.
pub fn render(
    image: &RgbImage,
    label: &[u8],
    edges: &[u8],
    geometry: &Geometry,
    normaliser: &Normaliser,
    ignore_index: u8,
    out: SampleSlot<'_>,
) {
    let g = geometry;
    let (out_w, out_h) = (g.width, g.height);
    let (src_w, src_h) = (g.source_width, g.source_height);
    debug_assert_eq!(image.pixels.len(), src_w * src_h * 3);
    debug_assert_eq!(out.image.len(), 3 * out_w * out_h);
    let plane = out_w * out_h;
    let (red, rest) = out.image.split_at_mut(plane);
    let (green, blue) = rest.split_at_mut(plane);
    let pad_values = [
        normaliser.value(0, 0),
        normaliser.value(1, 0),
        normaliser.value(2, 0),
    ];

    // Output columns that land inside the resized image form one contiguous run: a prefix
    // without flip, a suffix with it. Everything else is padding.
    let inside: Vec<bool> = (0..out_w)
        .map(|x| g.scaled_column(x) < g.scaled_width)
        .collect();
    let first_inside = inside.iter().position(|&i| i).unwrap_or(out_w);
    let end_inside = inside
        .iter()
        .rposition(|&i| i)
        .map_or(first_inside, |p| p + 1);
    let columns: Vec<(Tap, usize)> = (first_inside..end_inside)
        .map(|x| {
            let scaled = g.scaled_column(x);
            (
                bilinear_tap(scaled, src_w, g.scaled_width),
                nearest(scaled, src_w, g.scaled_width),
            )
        })
        .collect();

    for y in 0..out_h {
        let row = y * out_w..(y + 1) * out_w;
        let (red, green, blue) = (
            &mut red[row.clone()],
            &mut green[row.clone()],
            &mut blue[row.clone()],
        );
        let (label_out, edges_out) = (&mut out.label[row.clone()], &mut out.edges[row]);
        let scaled_y = g.crop_y + y;
        if scaled_y >= g.scaled_height {
            red.fill(pad_values[0]);
            green.fill(pad_values[1]);
            blue.fill(pad_values[2]);
            label_out.fill(ignore_index);
            edges_out.fill(0);
            continue;
        }
        for range in [0..first_inside, end_inside..out_w] {
            red[range.clone()].fill(pad_values[0]);
            green[range.clone()].fill(pad_values[1]);
            blue[range.clone()].fill(pad_values[2]);
            label_out[range.clone()].fill(ignore_index);
            edges_out[range].fill(0);
        }

        let vertical = bilinear_tap(scaled_y, src_h, g.scaled_height);
        let top = &image.pixels[vertical.first * src_w * 3..(vertical.first + 1) * src_w * 3];
        let bottom = &image.pixels[vertical.second * src_w * 3..(vertical.second + 1) * src_w * 3];
        let (wt, wb) = (vertical.first_weight, vertical.second_weight);
        let span = first_inside..end_inside;
        let outputs = red[span.clone()]
            .iter_mut()
            .zip(green[span.clone()].iter_mut())
            .zip(blue[span.clone()].iter_mut());
        for (((r, gr), b), (tap, _)) in outputs.zip(&columns) {
            let (a, c) = (tap.first * 3, tap.second * 3);
            let (wa, wc) = (tap.first_weight, tap.second_weight);
            let sample = |channel: usize| {
                let upper = u32::from(top[a + channel]) * wa + u32::from(top[c + channel]) * wc;
                let lower =
                    u32::from(bottom[a + channel]) * wa + u32::from(bottom[c + channel]) * wc;
                ((upper * wt + lower * wb + ROUND) >> (2 * WEIGHT_BITS)) as u8
            };
            *r = normaliser.table[0][usize::from(sample(0))];
            *gr = normaliser.table[1][usize::from(sample(1))];
            *b = normaliser.table[2][usize::from(sample(2))];
        }

        let source_y = nearest(scaled_y, src_h, g.scaled_height);
        let label_row = &label[source_y * src_w..(source_y + 1) * src_w];
        let edge_row = &edges[source_y * src_w..(source_y + 1) * src_w];
        for ((l, e), (_, source_x)) in label_out[span.clone()]
            .iter_mut()
            .zip(edges_out[span].iter_mut())
            .zip(&columns)
        {
            *l = label_row[*source_x];
            *e = edge_row[*source_x];
        }
    }
}

/// The whole image resized to `size × size` (OpenCV-style bilinear, as the training pipeline;
/// no crop), mirrored when `flip`, normalised: `[3, size, size]` planar. SAM2's input.
pub fn resize_square(
    image: &RgbImage,
    size: usize,
    normaliser: &Normaliser,
    flip: bool,
) -> Vec<f32> {
    let geometry = Geometry {
        source_width: image.width,
        source_height: image.height,
        scaled_width: size,
        scaled_height: size,
        crop_x: 0,
        crop_y: 0,
        width: size,
        height: size,
        flip,
    };
    // `render` also resamples a label and an edge map: give it blank ones.
    let blank = vec![0u8; image.width * image.height];
    let mut out = vec![0f32; 3 * size * size];
    let (mut label, mut edges) = (vec![0u8; size * size], vec![0u8; size * size]);
    render(
        image,
        &blank,
        &blank,
        &geometry,
        normaliser,
        0,
        SampleSlot {
            image: &mut out,
            label: &mut label,
            edges: &mut edges,
        },
    );
    out
}

#[cfg(test)]
#[path = "augment_tests.rs"]
mod tests;

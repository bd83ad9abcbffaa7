//! `SAM2Transforms` for one image: RGB bytes → `[1, 3, S, S]` model input.
//!
//! 1. `ToTensor`: divide by 255.
//! 2. `Resize((S, S))`: a **square** resize that ignores the aspect ratio (no padding, unlike
//!    SAM 1), bilinear with **antialias** (torchvision on a tensor). When shrinking, the
//!    triangle filter widens to the scale, which plain bilinear interpolation does not do.
//! 3. `Normalize` with the ImageNet mean and standard deviation.
//!
//! The work is done on the host in f64 (it is data preparation, not part of the graph).

use burn::tensor::{backend::Backend, DType, Tensor, TensorData};

use super::Sam2Error;

/// ImageNet mean (RGB).
pub const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
/// ImageNet standard deviation (RGB).
pub const STD: [f64; 3] = [0.229, 0.224, 0.225];

/// The taps of one output sample: the first input index and the normalised weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Taps {
    /// First input index.
    pub start: usize,
    /// Weights of inputs `start..start + weights.len()`, summing to 1.
    pub weights: Vec<f64>,
}

/// PyTorch's antialiased bilinear (triangle) filter for a 1-D resize `input → output`
/// (`F.interpolate(..., mode="bilinear", antialias=True, align_corners=False)`).
pub fn antialias_taps(input: usize, output: usize) -> Vec<Taps> {
    let scale = input as f64 / output as f64;
    let support = scale.max(1.0);
    (0..output)
        .map(|i| {
            let center = scale * (i as f64 + 0.5);
            // `int()` in the reference truncates toward zero; the bounds are then clamped.
            let start = ((center - support + 0.5).trunc().max(0.0)) as usize;
            let end = ((center + support + 0.5).trunc() as usize).min(input);
            let mut weights: Vec<f64> = (start..end)
                .map(|j| (1.0 - ((j as f64 + 0.5 - center) / support).abs()).max(0.0))
                .collect();
            let total: f64 = weights.iter().sum();
            if total > 0.0 {
                weights.iter_mut().for_each(|w| *w /= total);
            }
            Taps { start, weights }
        })
        .collect()
}

/// Resizes a channel-major `[C, H, W]` image to `[C, out_h, out_w]` with [`antialias_taps`]
/// (along W, then along H). Also how SAM2Base shrinks a binary mask prompt to the prompt
/// encoder's mask size (`_forward_sam_heads`).
pub fn resize_planes(
    planes: &[f64],
    [c, h, w]: [usize; 3],
    [out_h, out_w]: [usize; 2],
) -> Vec<f64> {
    let along_w = antialias_taps(w, out_w);
    let along_h = antialias_taps(h, out_h);
    let mut rows = vec![0.0; c * h * out_w];
    for plane in 0..c {
        for y in 0..h {
            let src = &planes[(plane * h + y) * w..][..w];
            let dst = &mut rows[(plane * h + y) * out_w..][..out_w];
            for (out, taps) in dst.iter_mut().zip(&along_w) {
                *out = taps
                    .weights
                    .iter()
                    .zip(&src[taps.start..])
                    .map(|(a, b)| a * b)
                    .sum();
            }
        }
    }
    let mut out = vec![0.0; c * out_h * out_w];
    for plane in 0..c {
        for (oy, taps) in along_h.iter().enumerate() {
            let dst = &mut out[(plane * out_h + oy) * out_w..][..out_w];
            for (k, weight) in taps.weights.iter().enumerate() {
                let src = &rows[(plane * h + taps.start + k) * out_w..][..out_w];
                dst.iter_mut().zip(src).for_each(|(d, s)| *d += weight * s);
            }
        }
    }
    out
}

/// An RGB image (`height × width × 3` bytes, row-major) -> the normalised model input
/// `[1, 3, size[0], size[1]]` in `dtype` (computed in f64, rounded once to `dtype`: an f64
/// model gets f64 pixels, not f32 ones widened).
pub fn preprocess_rgb<B: Backend>(
    rgb: &[u8],
    [height, width]: [usize; 2],
    size: [usize; 2],
    dtype: DType,
    device: &B::Device,
) -> Result<Tensor<B, 4>, Sam2Error> {
    if height == 0 || width == 0 || rgb.len() != height * width * 3 {
        return Err(Sam2Error::shape(format!(
            "an RGB image of {height}×{width} needs {} bytes, got {}",
            height * width * 3,
            rgb.len()
        )));
    }
    let mut planes = vec![0.0; 3 * height * width];
    for (pixel, values) in rgb.chunks_exact(3).enumerate() {
        for (channel, &value) in values.iter().enumerate() {
            planes[channel * height * width + pixel] = f64::from(value) / 255.0;
        }
    }
    let resized = resize_planes(&planes, [3, height, width], size);
    let plane = size[0] * size[1];
    let normalised: Vec<f64> = resized
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let channel = i / plane;
            (v - MEAN[channel]) / STD[channel]
        })
        .collect();
    let data = TensorData::new(normalised, [1, 3, size[0], size[1]]);
    // Through f32 unless f64 is asked for: a half type then rounds as a cast from f32 would.
    let data = match dtype {
        DType::F64 => data,
        _ => data.convert_dtype(DType::F32).convert_dtype(dtype),
    };
    Ok(Tensor::from_data(data, (device, dtype)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upscaling_is_plain_bilinear_and_shrinking_widens_the_triangle() {
        // 2 → 4: bilinear with half-pixel centres (the first sample clamps to input 0).
        let up = antialias_taps(2, 4);
        assert_eq!(
            up[0],
            Taps {
                start: 0,
                weights: vec![1.0]
            }
        );
        assert_eq!(up[1].weights, [0.75, 0.25]);
        assert_eq!(up[2].weights, [0.25, 0.75]);
        // 4 → 2: support 2 around centres 1 and 3, triangle 1 − |d|/2, normalised.
        let down = antialias_taps(4, 2);
        let close = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12);
        assert_eq!(down[0].start, 0);
        assert!(
            close(&down[0].weights, &[3.0 / 7.0, 3.0 / 7.0, 1.0 / 7.0]),
            "{down:?}"
        );
        assert_eq!(down[1].start, 1);
        assert!(
            close(&down[1].weights, &[1.0 / 7.0, 3.0 / 7.0, 3.0 / 7.0]),
            "{down:?}"
        );
    }
}

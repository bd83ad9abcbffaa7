//! `fill_holes_in_mask_scores`: background regions (logit ≤ 0) of at most `max_area` pixels,
//! 8-connected, enclosed or not, are set to 0.1 (foreground), as the official CUDA connected
//! components extension computes them. Runs on the host: the masks are small (4h × 4w).

use burn::tensor::{backend::Backend, Tensor, TensorData};

use crate::sam2::Sam2Error;

/// The logit a filled hole gets.
const FILLED: f64 = 0.1;

/// Fills the small holes of every `[N, 1, H, W]` mask; `max_area` 0 leaves them unchanged.
pub fn fill_holes<B: Backend>(
    masks: Tensor<B, 4>,
    max_area: usize,
) -> Result<Tensor<B, 4>, Sam2Error> {
    if max_area == 0 {
        return Ok(masks);
    }
    let [n, c, h, w] = masks.dims();
    let dtype = masks.dtype();
    let device = masks.device();
    let mut values: Vec<f64> = masks
        .into_data()
        .convert::<f64>()
        .to_vec()
        .map_err(|e| Sam2Error::shape(format!("mask logits: {e:?}")))?;
    for plane in values.chunks_exact_mut(h * w) {
        fill_plane(plane, [h, w], max_area);
    }
    let data = TensorData::new(values, [n, c, h, w]);
    Ok(Tensor::<B, 4>::from_data(data, (&device, dtype)))
}

/// One `h × w` plane, in place.
fn fill_plane(plane: &mut [f64], [h, w]: [usize; 2], max_area: usize) {
    let mut seen = vec![false; h * w];
    let mut component = Vec::new();
    let mut stack = Vec::new();
    for start in 0..h * w {
        if seen[start] || plane[start] > 0.0 {
            continue;
        }
        component.clear();
        seen[start] = true;
        stack.push(start);
        while let Some(pixel) = stack.pop() {
            component.push(pixel);
            let (y, x) = ((pixel / w) as i64, (pixel % w) as i64);
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let (ny, nx) = (y + dy, x + dx);
                    if ny < 0 || nx < 0 || ny >= h as i64 || nx >= w as i64 {
                        continue;
                    }
                    let next = ny as usize * w + nx as usize;
                    if !seen[next] && plane[next] <= 0.0 {
                        seen[next] = true;
                        stack.push(next);
                    }
                }
            }
        }
        if component.len() <= max_area {
            for &pixel in &component {
                plane[pixel] = FILLED;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fill_plane;

    #[test]
    fn small_background_regions_become_foreground_and_large_ones_stay() {
        // 6×6 foreground (1.0) with a 2-pixel hole, a diagonal pair (8-connected: one region
        // of 2) and a 9-pixel background block in the corner.
        let (h, w) = (6, 6);
        let mut plane = vec![1.0; h * w];
        plane[w + 1] = -1.0;
        plane[w + 2] = -1.0;
        plane[3 * w + 4] = -2.0;
        plane[4 * w + 5] = 0.0; // ≤ 0 counts as background
        for y in 3..6 {
            for x in 0..3 {
                plane[y * w + x] = -5.0;
            }
        }
        let mut filled = plane.clone();
        fill_plane(&mut filled, [h, w], 8);
        for (i, (&before, &after)) in plane.iter().zip(&filled).enumerate() {
            let in_corner = i / w >= 3 && i % w < 3;
            let expected = if before > 0.0 || in_corner {
                before
            } else {
                0.1
            };
            assert_eq!(after, expected, "pixel {i}");
        }
        // With max_area 1 the 2-pixel regions stay.
        let mut kept = plane.clone();
        fill_plane(&mut kept, [h, w], 1);
        assert_eq!(kept, plane);
    }
}

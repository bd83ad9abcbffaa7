//! Deterministic clicks for evaluation: SAM2's `sample_one_point_from_error_center` (the
//! RITM protocol). The click goes to the pixel farthest from the border of the false-negative
//! or the false-positive region, whichever reaches deeper; a positive click for false negatives,
//! a negative one for false positives. Without a prediction this is the object's "centre".
//!
//! Upstream uses OpenCV's exact Euclidean distance transform on the error mask padded by one
//! background pixel; we compute the same exact transform with Felzenszwalb and Huttenlocher's
//! lower-envelope algorithm (two 1-D passes of squared distances).

use super::prompts::{Click, MaskView, NEGATIVE, POSITIVE};

/// Squared distance of every pixel to the nearest pixel outside `inside`, where everything
/// beyond the image counts as outside (the padding upstream adds).
pub fn squared_distance_transform(size: usize, inside: &dyn Fn(usize) -> bool) -> Vec<f64> {
    // The image border is one pixel away from the padding ring.
    let far = ((size + 2) * (size + 2)) as f64 * 4.0;
    let n = size + 2;
    let mut grid = vec![0.0f64; n * n];
    for y in 0..size {
        for x in 0..size {
            if inside(y * size + x) {
                grid[(y + 1) * n + x + 1] = far;
            }
        }
    }
    let mut line = vec![0.0; n];
    for x in 0..n {
        for (y, value) in line.iter_mut().enumerate() {
            *value = grid[y * n + x];
        }
        let out = transform_1d(&line);
        for (y, value) in out.into_iter().enumerate() {
            grid[y * n + x] = value;
        }
    }
    for y in 0..n {
        let out = transform_1d(&grid[y * n..(y + 1) * n]);
        grid[y * n..(y + 1) * n].copy_from_slice(&out);
    }
    let mut result = Vec::with_capacity(size * size);
    for y in 0..size {
        result.extend_from_slice(&grid[(y + 1) * n + 1..(y + 1) * n + 1 + size]);
    }
    result
}

/// `d(p) = min_q (p − q)² + f(q)`: the lower envelope of parabolas.
fn transform_1d(f: &[f64]) -> Vec<f64> {
    let n = f.len();
    let mut vertices = vec![0usize; n];
    let mut bounds = vec![0.0f64; n + 1];
    let mut k = 0;
    bounds[0] = f64::NEG_INFINITY;
    bounds[1] = f64::INFINITY;
    for q in 1..n {
        let intersection = |v: usize| {
            ((f[q] + (q * q) as f64) - (f[v] + (v * v) as f64)) / (2.0 * (q as f64 - v as f64))
        };
        let mut s = intersection(vertices[k]);
        while s <= bounds[k] {
            k -= 1;
            s = intersection(vertices[k]);
        }
        k += 1;
        vertices[k] = q;
        bounds[k] = s;
        bounds[k + 1] = f64::INFINITY;
    }
    let mut out = vec![0.0; n];
    k = 0;
    for (q, value) in out.iter_mut().enumerate() {
        while bounds[k + 1] < q as f64 {
            k += 1;
        }
        let d = q as f64 - vertices[k] as f64;
        *value = d * d + f[vertices[k]];
    }
    out
}

/// The evaluation click for `truth` given `prediction` (`None`: nothing predicted yet).
pub fn center_click(truth: MaskView<'_>, prediction: Option<MaskView<'_>>) -> Click {
    let size = truth.size;
    let predicted = |i: usize| prediction.is_some_and(|p| p.pixels[i] != 0);
    let truth_at = |i: usize| truth.pixels[i] != 0;
    let false_negative = squared_distance_transform(size, &|i| truth_at(i) && !predicted(i));
    let false_positive = squared_distance_transform(size, &|i| !truth_at(i) && predicted(i));
    // The first maximum in raster order, as torch's argmax.
    let best = |d: &[f64]| {
        d.iter()
            .enumerate()
            .fold((0usize, f64::NEG_INFINITY), |(bi, bv), (i, &v)| {
                if v > bv {
                    (i, v)
                } else {
                    (bi, bv)
                }
            })
    };
    let (fn_index, fn_max) = best(&false_negative);
    let (fp_index, fp_max) = best(&false_positive);
    let (index, label) = if fn_max > fp_max {
        (fn_index, POSITIVE)
    } else {
        (fp_index, NEGATIVE)
    };
    Click {
        x: (index % size) as f32,
        y: (index / size) as f32,
        label,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_match_brute_force() {
        let size = 9;
        let inside = |i: usize| {
            let (x, y) = (i % size, i / size);
            (x + 2 * y) % 7 != 0 && x != 4
        };
        let fast = squared_distance_transform(size, &inside);
        for (i, &distance) in fast.iter().enumerate() {
            let (x, y) = ((i % size) as i64 + 1, (i / size) as i64 + 1);
            let mut best = i64::MAX;
            for qy in 0..size as i64 + 2 {
                for qx in 0..size as i64 + 2 {
                    let on_image =
                        (1..=size as i64).contains(&qx) && (1..=size as i64).contains(&qy);
                    let background =
                        !on_image || !inside(((qy - 1) * size as i64 + qx - 1) as usize);
                    if background {
                        best = best.min((x - qx).pow(2) + (y - qy).pow(2));
                    }
                }
            }
            let expected = if inside(i) { best as f64 } else { 0.0 };
            assert_eq!(distance, expected, "pixel {i}");
        }
    }

    #[test]
    fn clicks_go_to_the_centre_of_the_larger_error() {
        let size = 11;
        let mut truth = vec![0u8; size * size];
        for y in 2..9 {
            for x in 2..9 {
                truth[y * size + x] = 1;
            }
        }
        let first = center_click(
            MaskView {
                size,
                pixels: &truth,
            },
            None,
        );
        assert_eq!((first.x, first.y, first.label), (5.0, 5.0, POSITIVE));
        // Predicting the object plus a thick band on the right: the click is negative, in the
        // band.
        let mut prediction = truth.clone();
        for y in 0..size {
            for x in 9..size {
                prediction[y * size + x] = 1;
            }
        }
        let click = center_click(
            MaskView {
                size,
                pixels: &truth,
            },
            Some(MaskView {
                size,
                pixels: &prediction,
            }),
        );
        assert_eq!(click.label, NEGATIVE);
        assert!(click.x >= 9.0, "{click:?}");
    }
}

//! The point grids that prompt the model: `points_per_side²` evenly spaced clicks per crop.

/// `n × n` points in `[0, 1]²`, each at the centre of its cell, rows of constant `y` first
/// (upstream's `build_point_grid`).
///
/// Kept in f64 as upstream (numpy) so that `grid · crop size`, cast to f32 once, gives the
/// same click as the official code to the last bit.
pub fn point_grid(points_per_side: usize) -> Vec<[f64; 2]> {
    let side = one_side(points_per_side);
    side.iter()
        .flat_map(|&y| side.iter().map(move |&x| [x, y]))
        .collect()
}

/// One grid per crop layer: layer `i` has `points_per_side / downscale^i` points a side
/// (truncated, as upstream's `int(n / scale**i)`).
pub fn layer_point_grids(
    points_per_side: usize,
    crop_layers: usize,
    downscale_per_layer: usize,
) -> Vec<Vec<[f64; 2]>> {
    (0..=crop_layers)
        .map(|layer| {
            let scale = (downscale_per_layer as f64).powi(layer as i32);
            point_grid((points_per_side as f64 / scale) as usize)
        })
        .collect()
}

/// numpy's `linspace(offset, 1 - offset, n)`: `start + i · step`, with the last value set to
/// `stop` exactly, which is what numpy does and a plain `i · step` would miss by an ulp.
fn one_side(n: usize) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let offset = 1.0 / (2 * n) as f64;
    let (start, stop) = (offset, 1.0 - offset);
    if n == 1 {
        return vec![start];
    }
    let step = (stop - start) / (n - 1) as f64;
    let mut values: Vec<f64> = (0..n).map(|i| i as f64 * step + start).collect();
    values[n - 1] = stop;
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_a_side_matches_upstream() {
        // Official `sam2.utils.amg.build_point_grid(3)`, printed with Python's repr.
        let (a, b, c) = (0.16666666666666666, 0.5, 0.8333333333333334);
        let expected = vec![
            [a, a],
            [b, a],
            [c, a],
            [a, b],
            [b, b],
            [c, b],
            [a, c],
            [b, c],
            [c, c],
        ];
        assert_eq!(point_grid(3), expected);
    }

    #[test]
    fn thirty_two_a_side_spans_the_cell_centres() {
        let grid = point_grid(32);
        assert_eq!(grid.len(), 1024);
        assert_eq!(grid[0], [1.0 / 64.0, 1.0 / 64.0]);
        assert_eq!(grid[1023], [1.0 - 1.0 / 64.0, 1.0 - 1.0 / 64.0]);
        // Row-major with x fastest: the second point moves right, the 33rd moves down.
        assert_eq!(grid[1][1], grid[0][1]);
        assert!(grid[1][0] > grid[0][0]);
        assert_eq!(grid[32][0], grid[0][0]);
    }

    #[test]
    fn layers_shrink_by_the_downscale_factor() {
        // Official `build_all_layer_point_grids(4, 2, 2)`: shapes (16, 2), (4, 2), (1, 2) and
        // the last grid is [[0.5, 0.5]].
        let grids = layer_point_grids(4, 2, 2);
        let sizes: Vec<usize> = grids.iter().map(Vec::len).collect();
        assert_eq!(sizes, [16, 4, 1]);
        assert_eq!(grids[2], vec![[0.5, 0.5]]);
        // Factor 1 keeps every layer's grid the same.
        let same = layer_point_grids(5, 1, 1);
        assert_eq!(same[0], same[1]);
    }
}

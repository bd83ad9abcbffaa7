//! Small-region clean-up of mask logits: holes filled and islands removed up to an area, as the
//! official predictor does on the low-resolution logits when `min_mask_region_area > 0`
//! (`SAM2Transforms.postprocess_masks` with `max_hole_area = max_sprinkle_area`).

/// How far past the threshold a filled hole or removed island is set (upstream's ±10).
const FILL_MARGIN: f32 = 10.0;

/// For every `height × width` map in `logits` (maps back to back, row-major): background
/// regions (logit ≤ `threshold`) of at most `max_area` pixels become `threshold + 10`, and
/// foreground regions (logit > `threshold`) of at most `max_area` pixels become
/// `threshold - 10`. Regions are 8-connected, as upstream's `get_connected_components`, and
/// both kinds are found on the original logits (upstream computes both from the same input).
pub fn remove_small_regions(
    logits: &mut [f32],
    [height, width]: [usize; 2],
    threshold: f32,
    max_area: usize,
) {
    if max_area == 0 || height * width == 0 {
        return;
    }
    for map in logits.chunks_mut(height * width) {
        let foreground: Vec<bool> = map.iter().map(|&v| v > threshold).collect();
        let background: Vec<bool> = foreground.iter().map(|&f| !f).collect();
        let holes = small_regions(&background, [height, width], max_area);
        let islands = small_regions(&foreground, [height, width], max_area);
        for (i, value) in map.iter_mut().enumerate() {
            if holes[i] {
                *value = threshold + FILL_MARGIN;
            } else if islands[i] {
                *value = threshold - FILL_MARGIN;
            }
        }
    }
}

/// Which set pixels of `mask` lie in an 8-connected region of at most `max_area` pixels.
pub fn small_regions(mask: &[bool], [height, width]: [usize; 2], max_area: usize) -> Vec<bool> {
    let mut small = vec![false; mask.len()];
    let mut seen = vec![false; mask.len()];
    let mut region = Vec::new();
    let mut stack = Vec::new();
    for start in 0..mask.len() {
        if !mask[start] || seen[start] {
            continue;
        }
        region.clear();
        seen[start] = true;
        stack.push(start);
        while let Some(index) = stack.pop() {
            region.push(index);
            let (y, x) = (index / width, index % width);
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let (ny, nx) = (y as i64 + dy, x as i64 + dx);
                    if ny < 0 || nx < 0 || ny >= height as i64 || nx >= width as i64 {
                        continue;
                    }
                    let next = ny as usize * width + nx as usize;
                    if mask[next] && !seen[next] {
                        seen[next] = true;
                        stack.push(next);
                    }
                }
            }
        }
        if region.len() <= max_area {
            for &index in &region {
                small[index] = true;
            }
        }
    }
    small
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(rows: &[&str]) -> Vec<bool> {
        rows.iter()
            .flat_map(|r| r.chars().map(|c| c == '#'))
            .collect()
    }

    #[test]
    fn regions_are_eight_connected() {
        // Two diagonal pixels are one region of 2; the lone pixel is a region of 1.
        let mask = bits(&["#...", ".#..", "...#"]);
        assert_eq!(
            small_regions(&mask, [3, 4], 1),
            bits(&["....", "....", "...#"])
        );
        assert_eq!(small_regions(&mask, [3, 4], 2), mask);
    }

    #[test]
    fn holes_fill_and_islands_go_up_to_the_area() {
        // A 4 × 5 map: a foreground block with a one-pixel hole, and a two-pixel island.
        let rows = ["###..", "#.#..", "###.#", "....#"];
        let mut logits: Vec<f32> = bits(&rows)
            .iter()
            .map(|&f| if f { 3.0 } else { -3.0 })
            .collect();
        let original = logits.clone();
        remove_small_regions(&mut logits, [4, 5], 0.0, 2);
        // The hole (1, 1) becomes +10; the island (4, 2)-(4, 3) becomes -10. The outer
        // background (9 pixels) and the block (8 pixels) are above the area and stay.
        let mut expected = original.clone();
        expected[5 + 1] = 10.0;
        expected[2 * 5 + 4] = -10.0;
        expected[3 * 5 + 4] = -10.0;
        assert_eq!(logits, expected);
        // Area 0 changes nothing.
        let mut unchanged = original.clone();
        remove_small_regions(&mut unchanged, [4, 5], 0.0, 0);
        assert_eq!(unchanged, original);
    }

    #[test]
    fn each_map_is_cleaned_on_its_own() {
        // Two 1 × 3 maps back to back: a single foreground pixel in each is an island of 1,
        // not joined across the maps.
        let mut logits = vec![-1.0, -1.0, 2.0, 2.0, -1.0, -1.0];
        remove_small_regions(&mut logits, [1, 3], 0.0, 1);
        assert_eq!(logits, vec![-1.0, -1.0, -10.0, -10.0, -1.0, -1.0]);
    }
}

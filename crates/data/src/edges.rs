//! The PIDNet boundary target, computed on the full-resolution label map before augmentation
//! (official `gen_sample`, spec §2.4).
//!
//! The official code runs `cv2.Canny(label, 0.1, 0.2)`; with thresholds that low every label
//! discontinuity becomes a 1-px edge. We use the approximation the spec endorses: a pixel is an
//! edge when its label differs from its right or lower neighbour. Then the `pad_width` border is
//! cleared (`edge_pad`) and the map is dilated with a `dilation x dilation` square whose anchor
//! is OpenCV's default (`dilation / 2`), so a 4x4 kernel grows an edge 1 px up/left and 2 px
//! down/right.
//!
//! Every step works on whole rows of bytes so the compiler vectorises it: a 2048x1024 map takes
//! a few milliseconds.

use crate::config::EdgeConfig;

/// The 0/1 edge map of a `width x height` label map (row-major training ids).
pub fn edge_map(label: &[u8], width: usize, height: usize, config: &EdgeConfig) -> Vec<u8> {
    debug_assert_eq!(label.len(), width * height);
    let mut edges = vec![0u8; width * height];
    if width == 0 || height == 0 {
        return edges;
    }
    for y in 0..height {
        let row = &label[y * width..(y + 1) * width];
        let out = &mut edges[y * width..(y + 1) * width];
        // Right neighbour.
        for ((o, a), b) in out.iter_mut().zip(row).zip(&row[1..]) {
            *o = u8::from(a != b);
        }
        // Lower neighbour.
        if y + 1 < height {
            let below = &label[(y + 1) * width..(y + 2) * width];
            for ((o, a), b) in out.iter_mut().zip(row).zip(below) {
                *o |= u8::from(a != b);
            }
        }
    }
    if config.pad {
        clear_border(&mut edges, width, height, config.pad_width);
    }
    if config.dilation > 1 {
        dilate(&mut edges, width, height, config.dilation);
    }
    edges
}

/// `edge[p:-p, p:-p]` then zero padding back to size, as the official code does.
fn clear_border(edges: &mut [u8], width: usize, height: usize, pad: usize) {
    for y in 0..height {
        let row = &mut edges[y * width..(y + 1) * width];
        if y < pad || y + pad >= height {
            row.fill(0);
        } else {
            let left = pad.min(width);
            row[..left].fill(0);
            row[width.saturating_sub(pad)..].fill(0);
        }
    }
}

/// Binary dilation with a `size x size` square anchored at `size / 2`:
/// `out(x) = max(in(x - anchor + j))` for `j` in `0..size`, pixels outside the map count as 0.
/// Separable: rows first, then columns.
fn dilate(edges: &mut [u8], width: usize, height: usize, size: usize) {
    let anchor = size / 2;
    // Rows: OR of `size` shifted copies of each row.
    let mut row_buffer = vec![0u8; width];
    for y in 0..height {
        let row = &mut edges[y * width..(y + 1) * width];
        row_buffer.copy_from_slice(row);
        row.fill(0);
        for j in 0..size {
            // Output x reads input x + j - anchor.
            let shift = j as isize - anchor as isize;
            or_shifted(row, &row_buffer, shift);
        }
    }
    // Columns: OR of `size` shifted rows.
    let source = edges.to_vec();
    for y in 0..height {
        let out = &mut edges[y * width..(y + 1) * width];
        out.fill(0);
        for j in 0..size {
            let source_y = y as isize + j as isize - anchor as isize;
            if (0..height as isize).contains(&source_y) {
                let start = source_y as usize * width;
                for (o, s) in out.iter_mut().zip(&source[start..start + width]) {
                    *o |= s;
                }
            }
        }
    }
}

/// `out[x] |= input[x + shift]` where the index is in range.
fn or_shifted(out: &mut [u8], input: &[u8], shift: isize) {
    let width = out.len();
    let magnitude = shift.unsigned_abs().min(width);
    if shift >= 0 {
        for (o, i) in out[..width - magnitude].iter_mut().zip(&input[magnitude..]) {
            *o |= i;
        }
    } else {
        for (o, i) in out[magnitude..].iter_mut().zip(&input[..width - magnitude]) {
            *o |= i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_pad(dilation: usize) -> EdgeConfig {
        EdgeConfig {
            dilation,
            pad: false,
            pad_width: 6,
        }
    }

    /// A straightforward reference: mark, then dilate pixel by pixel.
    fn reference(label: &[u8], w: usize, h: usize, config: &EdgeConfig) -> Vec<u8> {
        let at = |x: usize, y: usize| label[y * w + x];
        let mut mark = vec![0u8; w * h];
        for y in 0..h {
            for x in 0..w {
                let right = x + 1 < w && at(x, y) != at(x + 1, y);
                let down = y + 1 < h && at(x, y) != at(x, y + 1);
                let inside = !config.pad
                    || (x >= config.pad_width
                        && y >= config.pad_width
                        && x + config.pad_width < w
                        && y + config.pad_width < h);
                mark[y * w + x] = u8::from((right || down) && inside);
            }
        }
        let anchor = (config.dilation / 2) as isize;
        let mut out = vec![0u8; w * h];
        for y in 0..h as isize {
            for x in 0..w as isize {
                let mut any = 0;
                for dy in 0..config.dilation as isize {
                    for dx in 0..config.dilation as isize {
                        let (sx, sy) = (x + dx - anchor, y + dy - anchor);
                        if sx >= 0 && sy >= 0 && sx < w as isize && sy < h as isize {
                            any |= mark[sy as usize * w + sx as usize];
                        }
                    }
                }
                out[y as usize * w + x as usize] = any;
            }
        }
        out
    }

    #[test]
    fn a_vertical_boundary_gives_the_official_band() {
        // Columns 0..5 are class 1, 5..12 class 2: the mark sits at x = 4 (left of the change).
        let (w, h) = (12, 3);
        let label: Vec<u8> = (0..w * h).map(|i| if i % w < 5 { 1 } else { 2 }).collect();
        let edges = edge_map(&label, w, h, &no_pad(4));
        // 4x4 dilation, anchor 2: the band covers x = 4-1 ..= 4+2.
        let expected_row: Vec<u8> = (0..w).map(|x| u8::from((3..=6).contains(&x))).collect();
        for y in 0..h {
            assert_eq!(&edges[y * w..(y + 1) * w], &expected_row[..], "row {y}");
        }
    }

    #[test]
    fn matches_the_pixelwise_reference_with_and_without_pad() {
        let (w, h) = (37, 29);
        let mut state = 7u64;
        let mut label = vec![0u8; w * h];
        // Blocky random regions plus some ignore pixels.
        for by in 0..(h / 4 + 1) {
            for bx in 0..(w / 5 + 1) {
                state = crate::rng::mix(state);
                let value = [0u8, 1, 2, 255][(state % 4) as usize];
                for y in by * 4..((by + 1) * 4).min(h) {
                    for x in bx * 5..((bx + 1) * 5).min(w) {
                        label[y * w + x] = value;
                    }
                }
            }
        }
        for config in [
            no_pad(4),
            no_pad(1),
            no_pad(3),
            EdgeConfig::default(),
            EdgeConfig {
                pad_width: 40,
                ..EdgeConfig::default()
            },
        ] {
            let fast = edge_map(&label, w, h, &config);
            assert_eq!(fast, reference(&label, w, h, &config), "{config:?}");
            assert!(fast.iter().all(|&e| e <= 1));
        }
        assert!(edge_map(&label, w, h, &no_pad(4)).contains(&1));
    }

    #[test]
    fn a_uniform_label_has_no_edge_and_tiny_maps_work() {
        assert!(edge_map(&[3u8; 64], 8, 8, &no_pad(4))
            .iter()
            .all(|&e| e == 0));
        assert_eq!(edge_map(&[1, 2], 2, 1, &no_pad(4)), vec![1, 1]);
        assert!(edge_map(&[], 0, 0, &EdgeConfig::default()).is_empty());
    }
}

//! The PIDNet boundary target, computed on the full-resolution label map before augmentation
//! (official `gen_sample`, spec §2.4).
//!
//! Two rules mark boundary pixels ([`EdgeRule`]):
//! * `Official` (the default) is `cv2.Canny(label, 0.1, 0.2)` as the official code runs it,
//!   restated bit for bit in `canny.rs`: one pixel per straight step (the upper/left side), two
//!   on 45° steps, a strength that depends on the id values, and no edge around some 1–2-px
//!   structures.
//! * `NeighbourDiff` marks a pixel whose label differs from its right or lower neighbour.
//!
//! Then the `pad_width` border is cleared (`edge_pad`) and the map is dilated with a
//! `dilation x dilation` square whose anchor is OpenCV's default (`dilation / 2`), so a 4x4
//! kernel grows an edge 1 px up/left and 2 px down/right, like `cv2.dilate(edge, ones((4, 4)))`.
//!
//! Every step works on whole rows of bytes so the compiler vectorises it: a 2048x1024 map takes
//! a few milliseconds.

use crate::canny::canny_marks;
use crate::config::{EdgeConfig, EdgeRule};

/// The 0/1 edge map of a `width x height` label map (row-major training ids).
pub fn edge_map(label: &[u8], width: usize, height: usize, config: &EdgeConfig) -> Vec<u8> {
    debug_assert_eq!(label.len(), width * height);
    let mut edges = match config.rule {
        EdgeRule::Official => canny_marks(label, width, height),
        EdgeRule::NeighbourDiff => neighbour_marks(label, width, height),
    };
    if width == 0 || height == 0 {
        return edges;
    }
    if config.pad {
        clear_border(&mut edges, width, height, config.pad_width);
    }
    if config.dilation > 1 {
        dilate(&mut edges, width, height, config.dilation);
    }
    edges
}

/// 1 where the label differs from its right or lower neighbour.
fn neighbour_marks(label: &[u8], width: usize, height: usize) -> Vec<u8> {
    let mut edges = vec![0u8; width * height];
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
///
/// Separable and streamed: each input row is dilated along the row into a ring of `size` rows
/// just before the output rows that read it, and output row `y` is the OR of the ring rows
/// `y - anchor ..= y + size - 1 - anchor`. Everything stays in cache and the map is read and
/// written once, in place (row `y` is overwritten only after its dilated copy was taken).
fn dilate(edges: &mut [u8], width: usize, height: usize, size: usize) {
    let anchor = size / 2;
    let lookahead = size - 1 - anchor;
    let mut ring = vec![vec![0u8; width]; size];
    let dilate_row = |ring: &mut [Vec<u8>], edges: &[u8], r: usize| {
        let out = &mut ring[r % size];
        out.fill(0);
        let row = &edges[r * width..(r + 1) * width];
        for j in 0..size {
            // Output x reads input x + j - anchor.
            or_shifted(out, row, j as isize - anchor as isize);
        }
    };
    for r in 0..lookahead.min(height) {
        dilate_row(&mut ring, edges, r);
    }
    for y in 0..height {
        if y + lookahead < height {
            dilate_row(&mut ring, edges, y + lookahead);
        }
        let out = &mut edges[y * width..(y + 1) * width];
        out.fill(0);
        for r in y.saturating_sub(anchor)..=(y + lookahead).min(height - 1) {
            for (o, &i) in out.iter_mut().zip(&ring[r % size]) {
                *o |= i;
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
#[path = "edges_tests.rs"]
mod tests;

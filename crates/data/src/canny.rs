//! OpenCV's `cv2.Canny(label, 0.1, 0.2)` on a uint8 label map, as the official PIDNet
//! `gen_sample` calls it, restated bit for bit (what `edges.rs` turns into boundary targets).
//!
//! What OpenCV does with these arguments (aperture 3, L1 magnitude):
//! 1. A 3x3 Sobel of the label ids with replicated borders gives `dx`, `dy`; the magnitude is
//!    `|dx| + |dy|`, so it depends on the id values (a 0/255 boundary is stronger than 3/4).
//! 2. Non-maximum suppression along one of four directions, chosen from `dx`, `dy` in 15-bit
//!    fixed point (`tan 22.5° ≈ 13573 / 2^15`); magnitudes outside the image count as 0, and the
//!    comparisons are strict on one side only, which decides ties on plateaus.
//! 3. Hysteresis with thresholds `floor(0.1) = floor(0.2) = 0`: every pixel that survives step 2
//!    with a non-zero magnitude is an edge, so hysteresis changes nothing and is not computed.
//!
//! The work goes row by row over three rows of magnitudes; the Sobel part runs on whole rows of
//! `i16` so the compiler vectorises it, and suppression skips runs of zero magnitude after one
//! vectorised test.

/// `tan(22.5°)` in OpenCV's 15-bit fixed point.
const TAN_22_5: i32 = 13573;
/// OpenCV's `CANNY_SHIFT`.
const SHIFT: u32 = 15;

/// Pixels whose magnitudes are tested for zero together (the bits of a `u32`).
const RUN: usize = 32;

/// The gradient of one image row.
struct GradientRow {
    dx: Vec<i16>,
    dy: Vec<i16>,
    /// `|dx| + |dy|` (at most 2 * 4 * 255, so it fits `i16`), with a 0 before column 0 and
    /// after the last column (OpenCV's zero magnitudes outside the image): column `x` is at
    /// `x + 1`.
    magnitude: Vec<i16>,
}

impl GradientRow {
    fn new(width: usize) -> Self {
        Self {
            dx: vec![0; width],
            dy: vec![0; width],
            magnitude: vec![0; width + 2],
        }
    }
}

/// The Sobel filter's scratch rows.
struct Sobel {
    width: usize,
    /// `up + 2 * mid + down` per column (the vertical smoothing of `dx`).
    smoothed: Vec<i16>,
    /// `down - up` per column (the vertical derivative of `dy`).
    derivative: Vec<i16>,
}

impl Sobel {
    fn new(width: usize) -> Self {
        Self {
            width,
            smoothed: vec![0; width],
            derivative: vec![0; width],
        }
    }

    /// The gradient of row `y` of `label` (`height` rows), borders replicated.
    fn row(&mut self, label: &[u8], height: usize, y: usize, out: &mut GradientRow) {
        let w = self.width;
        let row = |r: usize| &label[r * w..(r + 1) * w];
        let (up, mid, down) = (
            row(y.saturating_sub(1)),
            row(y),
            row((y + 1).min(height - 1)),
        );
        // Whole rows, as slices of exactly `w` (and `w + 2`): no bounds checks, vectorised.
        let (s, d) = (&mut self.smoothed[..w], &mut self.derivative[..w]);
        for x in 0..w {
            let (u, m, b) = (i16::from(up[x]), i16::from(mid[x]), i16::from(down[x]));
            s[x] = u + 2 * m + b;
            d[x] = b - u;
        }
        let (dx, dy, magnitude) = (
            &mut out.dx[..w],
            &mut out.dy[..w],
            &mut out.magnitude[..w + 2],
        );
        // Interior columns, then the replicated ends (column -1 reads 0, column w reads w - 1).
        for x in 1..w.saturating_sub(1) {
            let (gx, gy) = (s[x + 1] - s[x - 1], d[x - 1] + 2 * d[x] + d[x + 1]);
            (dx[x], dy[x], magnitude[x + 1]) = (gx, gy, gx.abs() + gy.abs());
        }
        for x in [0, w - 1] {
            let (left, right) = (x.saturating_sub(1), (x + 1).min(w - 1));
            let (gx, gy) = (s[right] - s[left], d[left] + 2 * d[x] + d[right]);
            (dx[x], dy[x], magnitude[x + 1]) = (gx, gy, gx.abs() + gy.abs());
        }
    }
}

/// Marks with 1 the pixels `cv2.Canny(label, 0.1, 0.2)` marks with 255 (row-major `width x
/// height` ids).
pub fn canny_marks(label: &[u8], width: usize, height: usize) -> Vec<u8> {
    debug_assert_eq!(label.len(), width * height);
    let mut marks = vec![0u8; width * height];
    if width == 0 || height == 0 {
        return marks;
    }
    let mut sobel = Sobel::new(width);
    // Magnitudes above the current row (zero above the image), the current row, the row below.
    let mut above = vec![0i16; width + 2];
    let mut current = GradientRow::new(width);
    let mut below = GradientRow::new(width);
    sobel.row(label, height, 0, &mut current);
    for y in 0..height {
        if y + 1 < height {
            sobel.row(label, height, y + 1, &mut below);
        } else {
            below.magnitude.fill(0);
        }
        suppress_row(
            &current,
            &above,
            &below.magnitude,
            &mut marks[y * width..(y + 1) * width],
        );
        above.copy_from_slice(&current.magnitude);
        std::mem::swap(&mut current, &mut below);
    }
    marks
}

/// Non-maximum suppression of one row: marks the pixels whose magnitude is a local maximum
/// across the edge, with OpenCV's direction sectors and tie rules. `above` and `below` are
/// padded like `row.magnitude`.
fn suppress_row(row: &GradientRow, above: &[i16], below: &[i16], marks: &mut [u8]) {
    let width = marks.len();
    let magnitude = &row.magnitude;
    for start in (0..width).step_by(RUN) {
        let end = (start + RUN).min(width);
        let run = &magnitude[start + 1..=end];
        // Most of a label map is flat: skip runs without gradient in one vectorised test.
        if run.iter().fold(0, |any, &m| any | m) == 0 {
            continue;
        }
        // Visit only the non-zero magnitudes, through a bit mask (no mispredicted branches).
        let mut nonzero = run
            .iter()
            .enumerate()
            .fold(0u32, |mask, (i, &m)| mask | (u32::from(m != 0) << i));
        while nonzero != 0 {
            let x = start + nonzero.trailing_zeros() as usize;
            nonzero &= nonzero - 1;
            // `p` indexes the padded rows: column x - 1 is at p - 1, column x + 1 at p + 1.
            let p = x + 1;
            let m = magnitude[p];
            let (dx, dy) = (i32::from(row.dx[x]), i32::from(row.dy[x]));
            let abs_x = dx.abs();
            let abs_y = dy.abs() << SHIFT;
            let tan22_x = abs_x * TAN_22_5;
            let local_maximum = if abs_y < tan22_x {
                // Mostly horizontal gradient: compare with the left and right neighbours.
                m > magnitude[p - 1] && m >= magnitude[p + 1]
            } else if abs_y > tan22_x + (abs_x << (SHIFT + 1)) {
                // Mostly vertical: the neighbours above and below.
                m > above[p] && m >= below[p]
            } else if (dx ^ dy) < 0 {
                // Diagonal, signs differ: up-right and down-left.
                m > above[p + 1] && m > below[p - 1]
            } else {
                // Diagonal, same signs: up-left and down-right.
                m > above[p - 1] && m > below[p + 1]
            };
            marks[x] = u8::from(local_maximum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straight_step_marks_one_side_only() {
        // Ids 1 | 2 between columns 3 and 4: magnitude 4 at both columns; the left one wins
        // (`m > left && m >= right`).
        let (w, h) = (8, 5);
        let label: Vec<u8> = (0..w * h).map(|i| if i % w < 4 { 1 } else { 2 }).collect();
        let marks = canny_marks(&label, w, h);
        for y in 0..h {
            let row: Vec<u8> = (0..w).map(|x| u8::from(x == 3)).collect();
            assert_eq!(&marks[y * w..(y + 1) * w], &row[..], "row {y}");
        }
        // The same step along rows marks the upper row.
        let label: Vec<u8> = (0..w * h).map(|i| if i / w < 2 { 7 } else { 0 }).collect();
        let marks = canny_marks(&label, w, h);
        for (i, &m) in marks.iter().enumerate() {
            assert_eq!(m, u8::from(i / w == 1), "pixel {i}");
        }
    }

    #[test]
    fn uniform_and_degenerate_maps() {
        assert!(canny_marks(&[9u8; 30], 6, 5).iter().all(|&m| m == 0));
        assert!(canny_marks(&[], 0, 0).is_empty());
        // One column, one row: the replicated border still gives a gradient.
        assert_eq!(canny_marks(&[0, 0, 5, 5], 1, 4), vec![0, 1, 0, 0]);
        assert_eq!(canny_marks(&[0, 0, 5, 5], 4, 1), vec![0, 1, 0, 0]);
    }
}

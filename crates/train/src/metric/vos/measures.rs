//! Region similarity J and boundary accuracy F of one frame, as the official DAVIS 2017
//! evaluation computes them (`davis2017/metrics.py`: `db_eval_iou`, `f_measure`, `_seg2bmap`).

use super::mask::BinaryMask;
use super::VosError;

/// The official boundary tolerance: 0.008 of the image diagonal.
pub const DEFAULT_BOUND_TH: f64 = 0.008;

/// The largest dilation radius accepted, in pixels (the official 0.008 of the diagonal is 8 at
/// 480p and 36 at 4K).
pub const MAX_BOUND_RADIUS: f64 = 4096.0;

/// Region similarity J: the intersection over union of `pred` and `gt`, pixels of `void`
/// left out; 1 when the union is empty (both masks empty), as the official `db_eval_iou`.
pub fn region_similarity(
    pred: &BinaryMask,
    gt: &BinaryMask,
    void: Option<&BinaryMask>,
) -> Result<f64, VosError> {
    pred.check_size(gt, "prediction")?;
    if let Some(void) = void {
        void.check_size(gt, "void mask")?;
    }
    let (mut intersection, mut union) = (0u64, 0u64);
    for (i, (&p, &g)) in pred.pixels().iter().zip(gt.pixels()).enumerate() {
        if void.is_some_and(|v| v.pixels()[i]) {
            continue;
        }
        intersection += u64::from(p && g);
        union += u64::from(p || g);
    }
    if union == 0 {
        return Ok(1.0);
    }
    Ok(intersection as f64 / union as f64)
}

/// Boundary accuracy F: the F-measure of the boundary precision and recall of `pred` against
/// `gt`, a boundary pixel matching when the other mask has a boundary pixel within a disk.
///
/// As the official `f_measure`: void pixels are cleared from both masks first; boundaries are
/// `_seg2bmap`'s (a pixel differing from its right, lower or lower-right neighbour, the last
/// row and column compared along themselves); the disk radius is `bound_th` pixels when
/// `bound_th >= 1`, else `ceil(bound_th × diagonal)`, and the disk is scikit-image's
/// `disk(radius)` applied as `cv2.dilate` applies a kernel (anchor at its centre, `size / 2`);
/// no boundary on either side scores 1, on one side only 0.
pub fn boundary_f_measure(
    pred: &BinaryMask,
    gt: &BinaryMask,
    void: Option<&BinaryMask>,
    bound_th: f64,
) -> Result<f64, VosError> {
    pred.check_size(gt, "prediction")?;
    if let Some(void) = void {
        void.check_size(gt, "void mask")?;
    }
    let (height, width) = (gt.height(), gt.width());
    let disk = DiskSpans::new(disk_radius(height, width, bound_th)?, height);
    let keep = |mask: &BinaryMask| -> Vec<bool> {
        match void {
            Some(void) => mask
                .pixels()
                .iter()
                .zip(void.pixels())
                .map(|(&m, &v)| m && !v)
                .collect(),
            None => mask.pixels().to_vec(),
        }
    };
    let fg_boundary = boundary_map(&keep(pred), height, width);
    let gt_boundary = boundary_map(&keep(gt), height, width);
    let n_fg = fg_boundary.iter().filter(|&&b| b).count();
    let n_gt = gt_boundary.iter().filter(|&&b| b).count();
    let (precision, recall) = match (n_fg, n_gt) {
        (0, 0) => (1.0, 1.0),
        (0, _) => (1.0, 0.0),
        (_, 0) => (0.0, 1.0),
        _ => {
            let fg_match = disk.matched(&fg_boundary, &gt_boundary, width);
            let gt_match = disk.matched(&gt_boundary, &fg_boundary, width);
            (fg_match as f64 / n_fg as f64, gt_match as f64 / n_gt as f64)
        }
    };
    if precision + recall == 0.0 {
        return Ok(0.0);
    }
    Ok(2.0 * precision * recall / (precision + recall))
}

/// The official radius: `bound_th` when `>= 1`, else `ceil(bound_th × ‖(h, w)‖)`.
fn disk_radius(height: usize, width: usize, bound_th: f64) -> Result<f64, VosError> {
    let invalid = || VosError::InvalidBoundTh {
        bound_th,
        max_radius: MAX_BOUND_RADIUS,
    };
    if !bound_th.is_finite() || bound_th < 0.0 {
        return Err(invalid());
    }
    let radius = if bound_th >= 1.0 {
        bound_th
    } else {
        let (h, w) = (height as f64, width as f64);
        (bound_th * (h * h + w * w).sqrt()).ceil()
    };
    if radius > MAX_BOUND_RADIUS {
        return Err(invalid());
    }
    Ok(radius)
}

/// `_seg2bmap` of a mask: 1-pixel boundaries offset half a pixel towards the origin.
pub(crate) fn boundary_map(mask: &[bool], height: usize, width: usize) -> Vec<bool> {
    let at = |y: usize, x: usize| mask[y * width + x];
    let mut boundary = vec![false; mask.len()];
    for y in 0..height {
        for x in 0..width {
            let s = at(y, x);
            let (has_right, has_below) = (x + 1 < width, y + 1 < height);
            boundary[y * width + x] = match (has_right, has_below) {
                (true, true) => s ^ at(y, x + 1) || s ^ at(y + 1, x) || s ^ at(y + 1, x + 1),
                (true, false) => s ^ at(y, x + 1),
                (false, true) => s ^ at(y + 1, x),
                (false, false) => false,
            };
        }
    }
    boundary
}

/// scikit-image's `disk(radius)` as row spans relative to `cv2.dilate`'s anchor: for each
/// kernel row within reach of the image, (row offset, first and last column offset).
struct DiskSpans {
    spans: Vec<(isize, isize, isize)>,
}

impl DiskSpans {
    fn new(radius: f64, height: usize) -> Self {
        // `np.arange(-radius, radius + 1)`: length ceil(stop - start); values start + i·delta
        // with delta = (start + 1) - start, the first two written as start and start + 1.
        let start = -radius;
        let len = ((radius + 1.0) - start).ceil().max(0.0) as usize;
        let delta = (start + 1.0) - start;
        let value = |i: usize| match i {
            0 => start,
            1 => start + 1.0,
            _ => start + i as f64 * delta,
        };
        let r2 = radius * radius;
        let anchor = (len / 2) as isize;
        let reach = height as isize;
        let mut spans = Vec::new();
        for row in 0..len {
            let dy = row as isize - anchor;
            if dy.abs() >= reach.max(1) {
                continue;
            }
            let vy = value(row);
            let mut inside = (0..len).filter(|&col| {
                let vx = value(col);
                vx * vx + vy * vy <= r2
            });
            if let Some(first) = inside.next() {
                let last = inside.next_back().unwrap_or(first);
                spans.push((dy, first as isize - anchor, last as isize - anchor));
            }
        }
        Self { spans }
    }

    /// How many pixels set in `a` have a pixel of `b` under the disk (the sum of `a` times
    /// `cv2.dilate(b, disk)`; pixels outside the image never count).
    fn matched(&self, a: &[bool], b: &[bool], width: usize) -> usize {
        if width == 0 {
            return 0;
        }
        let height = a.len() / width;
        // prefix[y][x] = pixels of `b` in row y left of column x.
        let stride = width + 1;
        let mut prefix = vec![0usize; height * stride];
        for y in 0..height {
            for x in 0..width {
                prefix[y * stride + x + 1] = prefix[y * stride + x] + usize::from(b[y * width + x]);
            }
        }
        let (h, w) = (height as isize, width as isize);
        let mut count = 0;
        for y in 0..h {
            for x in 0..w {
                if !a[(y * w + x) as usize] {
                    continue;
                }
                let hit = self.spans.iter().any(|&(dy, lo, hi)| {
                    let row = y + dy;
                    let (x0, x1) = ((x + lo).max(0), (x + hi).min(w - 1));
                    if row < 0 || row >= h || x0 > x1 {
                        return false;
                    }
                    let base = (row * (w + 1)) as usize;
                    prefix[base + x1 as usize + 1] > prefix[base + x0 as usize]
                });
                count += usize::from(hit);
            }
        }
        count
    }
}

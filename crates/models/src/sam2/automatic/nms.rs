//! Greedy box non-maximum suppression, as torchvision's `nms` on the CPU.

/// Indices of the boxes `[x0, y0, x1, y1]` kept by NMS, best score first.
///
/// Boxes are visited by score, highest first; ties keep their input order (torchvision sorts
/// stably), and the order of the result is the order the generator's records come out in.
/// A box is dropped when its IoU with a kept box is strictly above `iou_threshold`. Areas are
/// `(x1 - x0) · (y1 - y0)` in f32 with no `+1`, and the IoU is compared in f64, as in
/// torchvision's kernel; a degenerate pair (union 0) gives NaN and suppresses nothing.
pub fn box_nms(boxes: &[[f32; 4]], scores: &[f32], iou_threshold: f64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..boxes.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let area = |[x0, y0, x1, y1]: [f32; 4]| (x1 - x0) * (y1 - y0);
    let mut suppressed = vec![false; boxes.len()];
    let mut keep = Vec::new();
    for (rank, &i) in order.iter().enumerate() {
        if suppressed[i] {
            continue;
        }
        keep.push(i);
        let a = boxes[i];
        for &j in &order[rank + 1..] {
            if suppressed[j] {
                continue;
            }
            let b = boxes[j];
            let width = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
            let height = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
            let intersection = width * height;
            let iou = intersection / (area(a) + area(b) - intersection);
            if f64::from(iou) > iou_threshold {
                suppressed[j] = true;
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_boxes_keep_the_best() {
        let boxes = [
            [0.0, 0.0, 10.0, 10.0],
            [1.0, 0.0, 11.0, 10.0],   // IoU with box 0: 90 / 110 = 0.818
            [20.0, 20.0, 30.0, 30.0], // disjoint
            [0.0, 0.0, 10.0, 5.0],    // IoU with box 0: 50 / 100 = 0.5
        ];
        let scores = [0.8, 0.9, 0.7, 0.95];
        // Box 3 first (0.95); box 1 (0.9) overlaps it by 45 / 105 = 0.43: kept; box 0 (0.8)
        // overlaps box 1 by 0.818 > 0.7: dropped; box 2 kept.
        assert_eq!(box_nms(&boxes, &scores, 0.7), vec![3, 1, 2]);
        // At 0.4 box 1 also goes (0.43 > 0.4), and box 0 then meets only box 3 (0.5 > 0.4).
        assert_eq!(box_nms(&boxes, &scores, 0.4), vec![3, 2]);
    }

    #[test]
    fn the_threshold_is_strict_and_ties_keep_input_order() {
        // IoU exactly 0.5 (50 / 100) is not above 0.5.
        let boxes = [[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 5.0]];
        assert_eq!(box_nms(&boxes, &[1.0, 1.0], 0.5), vec![0, 1]);
        assert_eq!(box_nms(&boxes, &[1.0, 1.0], 0.49), vec![0]);
        // Equal scores: the earlier box wins.
        let same = [[0.0, 0.0, 4.0, 4.0], [0.0, 0.0, 4.0, 4.0]];
        assert_eq!(box_nms(&same, &[0.5, 0.5], 0.7), vec![0]);
        // Zero-area boxes (one-pixel masks) never suppress each other.
        let points = [[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]];
        assert_eq!(box_nms(&points, &[0.9, 0.8], 0.7), vec![0, 1]);
        assert!(box_nms(&[], &[], 0.7).is_empty());
    }
}

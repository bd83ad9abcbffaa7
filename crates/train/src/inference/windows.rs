//! Where sliding windows go, and how far a size is padded.

/// One window of a sliding-window pass, in image pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub top: usize,
    pub left: usize,
    pub height: usize,
    pub width: usize,
}

/// Start positions of windows of `crop` pixels every `stride` pixels along an axis of `size`
/// pixels: the last window is moved back to end at the border (mmsegmentation's placement), so
/// every window lies inside the image and the axis is fully covered. A crop at least as large as
/// the axis gives one window at 0.
pub fn window_starts(size: usize, crop: usize, stride: usize) -> Vec<usize> {
    if size <= crop || stride == 0 {
        return vec![0];
    }
    let count = (size - crop).div_ceil(stride) + 1;
    let mut starts: Vec<usize> = (0..count).map(|i| (i * stride).min(size - crop)).collect();
    starts.dedup();
    starts
}

/// All windows of `crop` (clamped to the image) every `stride` over an `[height, width]` image,
/// row by row.
pub fn windows([height, width]: [usize; 2], crop: [usize; 2], stride: [usize; 2]) -> Vec<Window> {
    let (crop_h, crop_w) = (crop[0].min(height), crop[1].min(width));
    let mut out = Vec::new();
    for top in window_starts(height, crop_h, stride[0]) {
        for left in window_starts(width, crop_w, stride[1]) {
            out.push(Window {
                top,
                left,
                height: crop_h,
                width: crop_w,
            });
        }
    }
    out
}

/// `size` rounded up to a multiple of `multiple`.
pub fn padded_to_multiple(size: usize, multiple: usize) -> usize {
    size.div_ceil(multiple.max(1)) * multiple.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_axis_and_end_at_the_border() {
        assert_eq!(window_starts(100, 40, 30), vec![0, 30, 60]);
        assert_eq!(window_starts(100, 40, 25), vec![0, 25, 50, 60]);
        assert_eq!(window_starts(1024, 1024, 512), vec![0]);
        assert_eq!(window_starts(64, 128, 32), vec![0]);
        assert_eq!(window_starts(2048, 1024, 1024), vec![0, 1024]);
        let all = windows([100, 64], [40, 128], [30, 30]);
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|w| w.width == 64 && w.top + w.height <= 100));
    }

    #[test]
    fn padding_rounds_up() {
        assert_eq!(padded_to_multiple(64, 8), 64);
        assert_eq!(padded_to_multiple(65, 8), 72);
        assert_eq!(padded_to_multiple(1, 8), 8);
    }
}

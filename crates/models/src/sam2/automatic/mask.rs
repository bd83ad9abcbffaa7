//! A binary mask on the CPU and the box around it.

/// An `height × width` binary mask, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryMask {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// `height · width` pixels, row by row.
    pub data: Vec<bool>,
}

impl BinaryMask {
    /// A mask of `data` (row-major); `None` when the length is not `height · width`.
    pub fn new(height: usize, width: usize, data: Vec<bool>) -> Option<Self> {
        (data.len() == height * width).then_some(Self {
            height,
            width,
            data,
        })
    }

    /// Whether pixel `(x, y)` is set.
    pub fn get(&self, x: usize, y: usize) -> bool {
        self.data[y * self.width + x]
    }

    /// Number of set pixels.
    pub fn area(&self) -> usize {
        self.data.iter().filter(|&&set| set).count()
    }

    /// `[x0, y0, x1, y1]` of the set pixels with inclusive ends, `[0, 0, 0, 0]` when empty
    /// (upstream's `batched_mask_to_box`).
    pub fn bounding_box(&self) -> [usize; 4] {
        let mut bbox = [usize::MAX, usize::MAX, 0, 0];
        let mut any = false;
        for (y, row) in self.data.chunks(self.width.max(1)).enumerate() {
            for (x, _) in row.iter().enumerate().filter(|(_, &set)| set) {
                any = true;
                bbox = [
                    bbox[0].min(x),
                    bbox[1].min(y),
                    bbox[2].max(x),
                    bbox[3].max(y),
                ];
            }
        }
        if any {
            bbox
        } else {
            [0; 4]
        }
    }

    /// This crop-frame mask placed at `(x0, y0)` of a `height × width` image, zero elsewhere
    /// (upstream's `uncrop_masks`).
    pub fn uncrop(&self, [x0, y0]: [usize; 2], [height, width]: [usize; 2]) -> Self {
        if x0 == 0 && y0 == 0 && self.height == height && self.width == width {
            return self.clone();
        }
        let mut data = vec![false; height * width];
        for (y, row) in self.data.chunks(self.width.max(1)).enumerate() {
            let start = (y + y0) * width + x0;
            data[start..start + self.width].copy_from_slice(row);
        }
        Self {
            height,
            width,
            data,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A mask drawn as rows of text, `#` inside.
    pub(crate) fn mask(rows: &[&str]) -> BinaryMask {
        let data = rows
            .iter()
            .flat_map(|r| r.chars().map(|c| c == '#'))
            .collect();
        BinaryMask::new(rows.len(), rows[0].len(), data).expect("rectangular")
    }

    #[test]
    fn boxes_match_upstream() {
        // Official `batched_mask_to_box` on these three 3 × 4 masks: [1, 0, 2, 1],
        // [0, 0, 0, 0] and [0, 0, 3, 2].
        assert_eq!(mask(&[".##.", ".#..", "...."]).bounding_box(), [1, 0, 2, 1]);
        assert_eq!(mask(&["....", "....", "...."]).bounding_box(), [0, 0, 0, 0]);
        assert_eq!(mask(&["####", "####", "####"]).bounding_box(), [0, 0, 3, 2]);
        assert_eq!(mask(&[".##.", ".#..", "...."]).area(), 3);
    }

    #[test]
    fn uncrop_pads_with_background() {
        let small = mask(&["#.", "##"]);
        let placed = small.uncrop([1, 2], [4, 3]);
        assert_eq!(placed, mask(&["...", "...", ".#.", ".##"]));
        assert_eq!(placed.bounding_box(), [1, 2, 2, 3]);
        assert_eq!(small.uncrop([0, 0], [2, 2]), small);
        assert!(BinaryMask::new(2, 2, vec![true; 3]).is_none());
    }
}

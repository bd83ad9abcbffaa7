//! One object as a binary mask on the pixel grid of its image.

/// A binary mask (`1` inside the object), row-major, with its area and tight bounding box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMask {
    pub width: usize,
    pub height: usize,
    /// `width · height` values, 0 or 1.
    pub pixels: Vec<u8>,
    /// What the object is: the class id for objects from semantic labels, the instance value
    /// for instance maps, the file's position for per-object mask files.
    pub id: u32,
}

/// The tight box around a mask, inclusive pixel coordinates (SAM2's `mask_to_box`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelBox {
    pub x0: usize,
    pub y0: usize,
    pub x1: usize,
    pub y1: usize,
}

impl PixelBox {
    /// Width in pixels, `x1 − x0 + 1`.
    pub fn width(&self) -> usize {
        self.x1 - self.x0 + 1
    }

    /// Height in pixels, `y1 − y0 + 1`.
    pub fn height(&self) -> usize {
        self.y1 - self.y0 + 1
    }
}

impl ObjectMask {
    /// A mask from 0/1 (or 0/non-zero) pixels.
    pub fn new(width: usize, height: usize, pixels: Vec<u8>, id: u32) -> Self {
        debug_assert_eq!(pixels.len(), width * height);
        let pixels = pixels.into_iter().map(|p| u8::from(p != 0)).collect();
        Self {
            width,
            height,
            pixels,
            id,
        }
    }

    /// Number of object pixels.
    pub fn area(&self) -> usize {
        self.pixels.iter().filter(|&&p| p != 0).count()
    }

    /// The tight box, or `None` for an empty mask.
    pub fn bounding_box(&self) -> Option<PixelBox> {
        let mut found: Option<PixelBox> = None;
        for (y, row) in self.pixels.chunks_exact(self.width.max(1)).enumerate() {
            let Some(first) = row.iter().position(|&p| p != 0) else {
                continue;
            };
            let last = row.iter().rposition(|&p| p != 0).unwrap_or(first);
            found = Some(match found {
                None => PixelBox {
                    x0: first,
                    y0: y,
                    x1: last,
                    y1: y,
                },
                Some(b) => PixelBox {
                    x0: b.x0.min(first),
                    y0: b.y0,
                    x1: b.x1.max(last),
                    y1: y,
                },
            });
        }
        found
    }

    /// The mask resampled to `size × size` with nearest neighbour — source index
    /// `floor(d · source / size)`, the rule the semantic pipeline uses for labels — and mirrored
    /// left-right when `flip`.
    pub fn resized(&self, size: usize, flip: bool) -> Self {
        let columns: Vec<usize> = (0..size)
            .map(|x| {
                let x = if flip { size - 1 - x } else { x };
                (x * self.width / size).min(self.width.saturating_sub(1))
            })
            .collect();
        let mut pixels = Vec::with_capacity(size * size);
        for y in 0..size {
            let source_y = (y * self.height / size).min(self.height.saturating_sub(1));
            let row = &self.pixels[source_y * self.width..(source_y + 1) * self.width];
            pixels.extend(columns.iter().map(|&x| row[x]));
        }
        Self {
            width: size,
            height: size,
            pixels,
            id: self.id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_area_and_resize() {
        #[rustfmt::skip]
        let mask = ObjectMask::new(4, 3, vec![
            0, 0, 0, 0,
            0, 1, 1, 0,
            0, 0, 1, 0,
        ], 7);
        assert_eq!(mask.area(), 3);
        assert_eq!(
            mask.bounding_box(),
            Some(PixelBox {
                x0: 1,
                y0: 1,
                x1: 2,
                y1: 2
            })
        );
        let big = mask.resized(8, false);
        // Rows 3..6 read source row 1 (4 pixels each), rows 6..8 source row 2 (2 each).
        assert_eq!(big.area(), 3 * 4 + 2 * 2);
        let flipped = mask.resized(4, true);
        let plain = mask.resized(4, false);
        for y in 0..4 {
            for x in 0..4 {
                assert_eq!(flipped.pixels[y * 4 + x], plain.pixels[y * 4 + 3 - x]);
            }
        }
        assert_eq!(ObjectMask::new(2, 2, vec![0; 4], 0).bounding_box(), None);
    }
}

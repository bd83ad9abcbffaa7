//! Run-length encoding of masks in COCO's layout: column-major runs, background first, and
//! COCO's compressed string form (pycocotools' `rleToString` / `rleFrString` scheme).

use super::mask::BinaryMask;

/// An uncompressed COCO RLE: `counts` alternate background and foreground runs over the
/// pixels in column-major (Fortran) order, starting with background (possibly 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rle {
    /// `[height, width]` of the mask.
    pub size: [usize; 2],
    /// Run lengths, background first.
    pub counts: Vec<u32>,
}

/// Why a COCO RLE string could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RleError {
    /// A character outside COCO's alphabet (`'0'..='o'`).
    #[error("COCO RLE string has the invalid character {character:?} at byte {position}")]
    Character { character: char, position: usize },
    /// The string ends in the middle of a number.
    #[error("COCO RLE string ends in the middle of a run length")]
    Truncated,
    /// A run is negative or the runs do not cover the mask.
    #[error("COCO RLE runs add up to {total} pixels, not the {expected} of a {height}×{width} mask (or a run is negative)")]
    Length {
        total: i64,
        expected: usize,
        height: usize,
        width: usize,
    },
}

impl Rle {
    /// Encodes a mask (upstream's `mask_to_rle_pytorch`).
    pub fn encode(mask: &BinaryMask) -> Self {
        let mut counts = Vec::new();
        let mut current = false;
        let mut run = 0u32;
        for x in 0..mask.width {
            for y in 0..mask.height {
                if mask.get(x, y) != current {
                    counts.push(run);
                    run = 0;
                    current = !current;
                }
                run += 1;
            }
        }
        counts.push(run);
        Self {
            size: [mask.height, mask.width],
            counts,
        }
    }

    /// The mask back (upstream's `rle_to_mask`).
    pub fn decode(&self) -> BinaryMask {
        let [height, width] = self.size;
        let mut data = vec![false; height * width];
        let mut index = 0usize;
        for (run, &count) in self.counts.iter().enumerate() {
            let set = run % 2 == 1;
            for i in index..(index + count as usize).min(height * width) {
                if set {
                    // Column-major index i is pixel (x = i / height, y = i % height).
                    data[(i % height) * width + i / height] = true;
                }
            }
            index += count as usize;
        }
        BinaryMask {
            height,
            width,
            data,
        }
    }

    /// Foreground pixels: the sum of the odd runs (upstream's `area_from_rle`).
    pub fn area(&self) -> u64 {
        self.counts
            .iter()
            .skip(1)
            .step_by(2)
            .map(|&c| u64::from(c))
            .sum()
    }

    /// COCO's compressed `counts` string: from the third run on, each run is stored as the
    /// difference to the run two before (so it may be negative), then written 5 bits at a time,
    /// low bits first, as characters `'0' + c` where bit 6 (`0x20`) says "more follows".
    pub fn to_coco_string(&self) -> String {
        let mut out = String::new();
        for (i, &count) in self.counts.iter().enumerate() {
            let mut value = i64::from(count);
            if i > 2 {
                value -= i64::from(self.counts[i - 2]);
            }
            loop {
                let mut chunk = (value & 0x1f) as u8;
                value >>= 5;
                // Stop once the remaining bits are pure sign extension of the chunk's top bit.
                let more = if chunk & 0x10 != 0 {
                    value != -1
                } else {
                    value != 0
                };
                if more {
                    chunk |= 0x20;
                }
                out.push(char::from(chunk + 48));
                if !more {
                    break;
                }
            }
        }
        out
    }

    /// Decodes COCO's compressed `counts` string for a mask of `[height, width]`.
    pub fn from_coco_string(size: [usize; 2], text: &str) -> Result<Self, RleError> {
        let mut counts: Vec<i64> = Vec::new();
        let bytes = text.as_bytes();
        let mut position = 0;
        while position < bytes.len() {
            let mut value = 0i64;
            let mut shift = 0;
            loop {
                let byte = *bytes.get(position).ok_or(RleError::Truncated)?;
                if !(48..48 + 64).contains(&byte) {
                    return Err(RleError::Character {
                        character: char::from(byte),
                        position,
                    });
                }
                let chunk = i64::from(byte - 48);
                value |= (chunk & 0x1f) << shift;
                position += 1;
                shift += 5;
                if chunk & 0x20 == 0 {
                    if chunk & 0x10 != 0 {
                        value |= -1i64 << shift;
                    }
                    break;
                }
            }
            if counts.len() > 2 {
                value += counts[counts.len() - 2];
            }
            counts.push(value);
        }
        let [height, width] = size;
        let total: i64 = counts.iter().sum();
        if counts.iter().any(|&c| c < 0 || c > i64::from(u32::MAX))
            || total != (height * width) as i64
        {
            return Err(RleError::Length {
                total,
                expected: height * width,
                height,
                width,
            });
        }
        Ok(Self {
            size,
            counts: counts.into_iter().map(|c| c as u32).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sam2::automatic::mask::tests::mask;

    #[test]
    fn encoding_matches_upstream() {
        // Official `mask_to_rle_pytorch` on these 3 × 4 masks gives counts [3, 2, 1, 1, 5],
        // [12] and [0, 12], and `area_from_rle` 3, 0 and 12.
        let cases = [
            (mask(&[".##.", ".#..", "...."]), vec![3, 2, 1, 1, 5], 3),
            (mask(&["....", "....", "...."]), vec![12], 0),
            (mask(&["####", "####", "####"]), vec![0, 12], 12),
        ];
        for (mask, counts, area) in cases {
            let rle = Rle::encode(&mask);
            assert_eq!(rle.counts, counts);
            assert_eq!(rle.size, [3, 4]);
            assert_eq!(rle.area(), area);
            assert_eq!(rle.decode(), mask);
        }
    }

    #[test]
    fn round_trip_through_a_scattered_mask() {
        let data: Vec<bool> = (0..7 * 5).map(|i| (i * 7 + i / 3) % 5 < 2).collect();
        let mask = BinaryMask::new(7, 5, data).expect("7 × 5");
        let rle = Rle::encode(&mask);
        assert_eq!(rle.counts.iter().sum::<u32>(), 35);
        assert_eq!(rle.area() as usize, mask.area());
        assert_eq!(rle.decode(), mask);
        let text = rle.to_coco_string();
        assert_eq!(Rle::from_coco_string([7, 5], &text).expect("valid"), rle);
    }

    #[test]
    fn coco_strings_by_hand() {
        // [3, 5, 2, 1]: the first three runs as they are ('3', '5', '2'); from the fourth on
        // the difference to the run two before: 1 - 5 = -4, whose low 5 bits are 28 with the
        // sign bit (0x10) set and nothing but sign left → '0' + 28 = 'L'.
        let rle = Rle {
            size: [1, 11],
            counts: vec![3, 5, 2, 1],
        };
        assert_eq!(rle.to_coco_string(), "352L");
        // 100 = 3·32 + 4: chunk 4 with "more" (4 | 32 = 36 → 'T'), then 3 → '3'.
        let long = Rle {
            size: [10, 10],
            counts: vec![100],
        };
        assert_eq!(long.to_coco_string(), "T3");
        assert_eq!(Rle::from_coco_string([1, 11], "352L").expect("valid"), rle);
        assert_eq!(Rle::from_coco_string([10, 10], "T3").expect("valid"), long);
    }

    #[test]
    fn bad_strings_are_refused() {
        assert!(matches!(
            Rle::from_coco_string([2, 5], "3 5"),
            Err(RleError::Character { position: 1, .. })
        ));
        assert!(matches!(
            Rle::from_coco_string([10, 10], "T"),
            Err(RleError::Truncated)
        ));
        assert!(matches!(
            Rle::from_coco_string([3, 3], "352L"),
            Err(RleError::Length { total: 11, .. })
        ));
    }
}

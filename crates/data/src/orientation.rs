//! The EXIF orientation of a photo, and turning the stored pixels upright as `cv2.imread` does
//! (the official loader; Pillow's `Image.open` does not, `ImageOps.exif_transpose` does).

use crate::pixels::RgbImage;

/// The EXIF `Orientation` tag.
const ORIENTATION_TAG: u16 = 0x0112;
/// The TIFF type SHORT.
const SHORT: u16 = 3;

/// The orientation (1..=8) of the first APP1 `Exif` segment that has a valid one.
pub fn exif_orientation<'a>(app1_segments: impl IntoIterator<Item = &'a [u8]>) -> Option<u8> {
    app1_segments
        .into_iter()
        .filter_map(|segment| segment.strip_prefix(b"Exif\0\0"))
        .find_map(tiff_orientation)
}

/// The orientation tag of IFD0 of a TIFF structure (the EXIF payload).
fn tiff_orientation(tiff: &[u8]) -> Option<u8> {
    let big_endian = match tiff.get(..4)? {
        [b'I', b'I', 42, 0] => false,
        [b'M', b'M', 0, 42] => true,
        _ => return None,
    };
    let u16_at = |at: usize| -> Option<u16> {
        let bytes: [u8; 2] = tiff.get(at..at + 2)?.try_into().ok()?;
        Some(if big_endian {
            u16::from_be_bytes(bytes)
        } else {
            u16::from_le_bytes(bytes)
        })
    };
    let u32_at = |at: usize| -> Option<u32> {
        let bytes: [u8; 4] = tiff.get(at..at + 4)?.try_into().ok()?;
        Some(if big_endian {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        })
    };
    let ifd = usize::try_from(u32_at(4)?).ok()?;
    let entries = usize::from(u16_at(ifd)?);
    (0..entries).find_map(|i| {
        let entry = ifd + 2 + 12 * i;
        if u16_at(entry)? != ORIENTATION_TAG || u16_at(entry + 2)? != SHORT {
            return None;
        }
        // A single SHORT sits in the first two bytes of the value field.
        let value = u16_at(entry + 8)?;
        (1..=8).contains(&value).then_some(value as u8)
    })
}

/// `image` turned upright for EXIF orientation `orientation` (1..=8; others leave it as is),
/// with OpenCV's transposes and flips:
/// 2 mirror, 3 rotate 180°, 4 flip vertically, 5 transpose, 6 rotate 90° clockwise,
/// 7 transverse (transpose + rotate 180°), 8 rotate 90° counter-clockwise.
pub fn apply_orientation(image: RgbImage, orientation: u8) -> RgbImage {
    if !(2..=8).contains(&orientation) {
        return image;
    }
    let (w, h) = (image.width, image.height);
    let transposed = orientation >= 5;
    let (out_w, out_h) = if transposed { (h, w) } else { (w, h) };
    // Stored (column, row) shown at output (x, y).
    let source = |x: usize, y: usize| -> (usize, usize) {
        match orientation {
            2 => (w - 1 - x, y),
            3 => (w - 1 - x, h - 1 - y),
            4 => (x, h - 1 - y),
            5 => (y, x),
            6 => (y, h - 1 - x),
            7 => (w - 1 - y, h - 1 - x),
            _ => (w - 1 - y, x),
        }
    };
    let mut pixels = vec![0u8; image.pixels.len()];
    for (y, row) in pixels.chunks_exact_mut(out_w * 3).enumerate() {
        for (x, px) in row.chunks_exact_mut(3).enumerate() {
            let (sx, sy) = source(x, y);
            let at = (sy * w + sx) * 3;
            px.copy_from_slice(&image.pixels[at..at + 3]);
        }
    }
    RgbImage {
        width: out_w,
        height: out_h,
        pixels,
    }
}

#[cfg(test)]
#[path = "orientation_tests.rs"]
mod tests;

//! EXIF parsing and the eight orientations, checked against compositions of plain transposes
//! and flips (OpenCV's recipe for each tag).

use super::*;

/// An EXIF APP1 payload whose IFD0 holds `entries` (tag, type, value) before the orientation.
fn exif(big_endian: bool, entries: &[(u16, u16, u16)]) -> Vec<u8> {
    let u16b = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let u32b = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = b"Exif\0\0".to_vec();
    out.extend_from_slice(if big_endian { b"MM\0\x2a" } else { b"II\x2a\0" });
    out.extend_from_slice(&u32b(8));
    out.extend_from_slice(&u16b(entries.len() as u16));
    for &(tag, kind, value) in entries {
        out.extend_from_slice(&u16b(tag));
        out.extend_from_slice(&u16b(kind));
        out.extend_from_slice(&u32b(1));
        out.extend_from_slice(&u16b(value));
        out.extend_from_slice(&[0, 0]);
    }
    out.extend_from_slice(&u32b(0));
    out
}

#[test]
fn the_orientation_tag_is_found_in_either_byte_order() {
    for big_endian in [false, true] {
        // After another tag (Make, ASCII), as cameras write it.
        let segment = exif(big_endian, &[(0x010F, 2, 0), (ORIENTATION_TAG, SHORT, 6)]);
        assert_eq!(exif_orientation([&segment[..]]), Some(6), "{big_endian}");
    }
}

#[test]
fn missing_invalid_and_foreign_segments_give_no_orientation() {
    let xmp = b"http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>".to_vec();
    let valid = exif(false, &[(ORIENTATION_TAG, SHORT, 8)]);
    // XMP shares APP1 with EXIF: skipped, the EXIF segment after it counts.
    assert_eq!(exif_orientation([&xmp[..], &valid[..]]), Some(8));
    assert_eq!(exif_orientation([&xmp[..]]), None);
    assert_eq!(exif_orientation(Vec::<&[u8]>::new()), None);
    for bad in [0, 9, 300] {
        let segment = exif(false, &[(ORIENTATION_TAG, SHORT, bad)]);
        assert_eq!(exif_orientation([&segment[..]]), None, "value {bad}");
    }
    let wrong_type = exif(false, &[(ORIENTATION_TAG, 4, 6)]);
    assert_eq!(exif_orientation([&wrong_type[..]]), None);
    // Cut anywhere: never a panic, never a value read past the end.
    for cut in 0..valid.len() - 1 {
        let orientation = exif_orientation([&valid[..cut]]);
        assert!(orientation.is_none() || cut >= 6 + 8 + 2 + 10, "cut {cut}");
    }
}

/// A `w x h` image whose pixels say where they are stored.
fn numbered(w: usize, h: usize) -> RgbImage {
    let pixels = (0..w * h)
        .flat_map(|i| [(i % w) as u8, (i / w) as u8, 7])
        .collect();
    RgbImage {
        width: w,
        height: h,
        pixels,
    }
}

fn pixel(image: &RgbImage, x: usize, y: usize) -> [u8; 3] {
    let at = (y * image.width + x) * 3;
    [image.pixels[at], image.pixels[at + 1], image.pixels[at + 2]]
}

/// `out(x, y) = image(f(x, y))` for an output of `w x h`.
fn remap(
    image: &RgbImage,
    w: usize,
    h: usize,
    f: impl Fn(usize, usize) -> (usize, usize),
) -> RgbImage {
    let pixels = (0..w * h)
        .flat_map(|i| {
            let (sx, sy) = f(i % w, i / w);
            pixel(image, sx, sy)
        })
        .collect();
    RgbImage {
        width: w,
        height: h,
        pixels,
    }
}

fn transpose(i: &RgbImage) -> RgbImage {
    remap(i, i.height, i.width, |x, y| (y, x))
}

/// `cv2.flip(i, 1)`.
fn mirror(i: &RgbImage) -> RgbImage {
    remap(i, i.width, i.height, |x, y| (i.width - 1 - x, y))
}

/// `cv2.flip(i, 0)`.
fn flip_vertically(i: &RgbImage) -> RgbImage {
    remap(i, i.width, i.height, |x, y| (x, i.height - 1 - y))
}

#[test]
fn every_orientation_is_opencvs_transpose_and_flip() {
    let stored = numbered(5, 3);
    let expected = [
        stored.clone(),
        mirror(&stored),
        mirror(&flip_vertically(&stored)),
        flip_vertically(&stored),
        transpose(&stored),
        mirror(&transpose(&stored)),
        mirror(&flip_vertically(&transpose(&stored))),
        flip_vertically(&transpose(&stored)),
    ];
    for (tag, want) in (1u8..=8).zip(expected) {
        assert_eq!(
            apply_orientation(stored.clone(), tag),
            want,
            "orientation {tag}"
        );
    }
    // 6 is a clockwise quarter turn: the stored bottom-left corner ends up top-left.
    let upright = apply_orientation(stored.clone(), 6);
    assert_eq!((upright.width, upright.height), (3, 5));
    assert_eq!(pixel(&upright, 0, 0), [0, 2, 7]);
    assert_eq!(apply_orientation(stored.clone(), 0), stored);
    assert_eq!(apply_orientation(stored.clone(), 9), stored);
}

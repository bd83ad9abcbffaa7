//! Decoding tests on PNG and JPEG files of every accepted pixel format.

use super::*;
use crate::labels::LabelEncoding;
use crate::test_support::{write_png, write_png_with};

fn indices(n: usize) -> LabelMap {
    let classes = (0..n).map(|i| format!("class {i}")).collect();
    LabelMap::new(&LabelEncoding::indices(classes), 255).expect("valid classes")
}

#[test]
fn grey_rgba_and_rgb_images_all_become_rgb() {
    let dir = tempfile::tempdir().expect("temp dir");
    let grey = dir.path().join("grey.png");
    write_png(&grey, 2, 1, 1, &[10, 200]);
    let rgba = dir.path().join("rgba.png");
    write_png(&rgba, 2, 1, 4, &[1, 2, 3, 0, 4, 5, 6, 255]);
    let rgb = dir.path().join("rgb.png");
    write_png(&rgb, 1, 2, 3, &[7, 8, 9, 10, 11, 12]);
    assert_eq!(
        read_image(&grey).expect("grey").pixels,
        [10, 10, 10, 200, 200, 200]
    );
    assert_eq!(read_image(&rgba).expect("rgba").pixels, [1, 2, 3, 4, 5, 6]);
    let image = read_image(&rgb).expect("rgb");
    assert_eq!((image.width, image.height), (1, 2));
    assert_eq!(image.pixels, [7, 8, 9, 10, 11, 12]);
}

#[test]
fn jpeg_images_decode_close_to_their_colour() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("flat.JPG");
    let flat = image::RgbImage::from_pixel(16, 8, image::Rgb([200, 40, 90]));
    flat.save_with_format(&path, image::ImageFormat::Jpeg)
        .expect("write jpeg");
    let decoded = read_image(&path).expect("jpeg");
    assert_eq!((decoded.width, decoded.height), (16, 8));
    for px in decoded.pixels.chunks_exact(3) {
        for (got, want) in px.iter().zip([200u8, 40, 90]) {
            assert!(got.abs_diff(want) <= 4, "{px:?}");
        }
    }
}

#[test]
fn palette_labels_keep_their_indices_even_at_four_bits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("palette.png");
    // 3 pixels of 4 bits: indices 1, 2, 0 -> bytes 0x12, 0x00 (row padded to a byte).
    let palette = vec![0, 0, 0, 255, 0, 0, 0, 255, 0];
    write_png_with(
        &path,
        3,
        1,
        png::ColorType::Indexed,
        png::BitDepth::Four,
        Some(palette),
        &[0x12, 0x00],
    );
    let label = read_label(&path, &indices(3)).expect("palette label");
    assert_eq!(label.pixels, [1, 2, 0]);
    assert_eq!((label.width, label.height), (3, 1));
}

#[test]
fn grey_labels_saved_as_rgb_are_accepted_but_colour_ones_are_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let grey_rgb = dir.path().join("grey_rgb.png");
    write_png(&grey_rgb, 2, 1, 3, &[1, 1, 1, 2, 2, 2]);
    assert_eq!(
        read_label(&grey_rgb, &indices(3)).expect("grey").pixels,
        [1, 2]
    );
    let colour = dir.path().join("colour.png");
    write_png(&colour, 2, 1, 3, &[1, 0, 0, 2, 2, 2]);
    let error = read_label(&colour, &indices(3)).expect_err("a colour label");
    assert!(matches!(error, DataError::UnsupportedFormat { ref path, .. } if path == &colour));
    assert!(error.to_string().contains("colour label"), "{error}");
}

#[test]
fn camvid_colour_labels_map_through_the_palette() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("seq_L.png");
    write_png(&path, 3, 1, 3, &[128, 64, 128, 128, 128, 128, 1, 2, 3]);
    let map = LabelMap::new(&LabelEncoding::CamVidColours, 255).expect("valid");
    assert_eq!(read_label(&path, &map).expect("colour").pixels, [6, 9, 255]);
}

#[test]
fn bad_label_values_name_the_file_the_values_and_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.png");
    write_png(&path, 4, 1, 1, &[0, 7, 7, 9]);
    let error = read_label(&path, &indices(3)).expect_err("7 and 9 are no class");
    let text = error.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(
        text.contains("value 7 on 2 pixels, value 9 on 1 pixel "),
        "{text}"
    );
    assert!(text.contains("ignore index 255"), "{text}");
    assert_eq!(error.path(), Some(path.as_path()));
}

#[test]
fn truncated_and_foreign_files_are_decode_errors_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("good.png");
    let pixels: Vec<u8> = (0..64 * 64 * 3).map(|i| (i * 7 % 251) as u8).collect();
    write_png(&good, 64, 64, 3, &pixels);
    let bytes = std::fs::read(&good).expect("read");
    let truncated = dir.path().join("truncated.png");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let error = read_image(&truncated).expect_err("half a PNG");
    assert!(
        matches!(error, DataError::Decode { ref path, .. } if path == &truncated),
        "{error}"
    );

    let text_file = dir.path().join("notes.png");
    std::fs::write(&text_file, "not an image").expect("write");
    let error = read_image(&text_file).expect_err("text");
    assert!(error.to_string().contains("not a PNG or JPEG"), "{error}");
    assert!(error.to_string().contains(&text_file.display().to_string()));

    let missing = dir.path().join("missing.png");
    let error = read_image(&missing).expect_err("missing");
    assert!(matches!(error, DataError::Io { ref path, .. } if path == &missing));
}

#[test]
fn sixteen_bit_and_jpeg_labels_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let deep = dir.path().join("instance.png");
    write_png_with(
        &deep,
        1,
        1,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        None,
        &[0x10, 0x00],
    );
    let error = read_label(&deep, &indices(3)).expect_err("16-bit");
    assert!(error.to_string().contains("16-bit"), "{error}");
    let jpeg = dir.path().join("label.jpg");
    image::RgbImage::from_pixel(4, 4, image::Rgb([1, 1, 1]))
        .save_with_format(&jpeg, image::ImageFormat::Jpeg)
        .expect("write jpeg");
    let error = read_label(&jpeg, &indices(3)).expect_err("lossy label");
    assert!(error.to_string().contains("must be PNG"), "{error}");
}

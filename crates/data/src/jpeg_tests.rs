//! JPEG decoding against libjpeg-turbo's output in OpenCV and Pillow (fixtures), errors, and
//! the EXIF switch.

use super::*;
use crate::decode::{read_image, read_image_with, Orientation, RgbImage};
use crate::test_support::{fixture_bytes, FixtureTensors};
use crate::DataError;

/// The JPEGs of `pipeline/`: 4:2:0, 4:2:2, progressive 4:4:4, a small 4:2:0, and the same with
/// EXIF orientation 6.
const STEMS: [&str; 5] = [
    "butterfly",
    "fruits",
    "Blender_Suzanne1",
    "HappyFish",
    "HappyFish_exif6",
];

/// Copies fixture `stem` into `dir` (a name with a space and non-ASCII letters).
fn copy_fixture(dir: &std::path::Path, stem: &str) -> std::path::PathBuf {
    let folder = dir.join("fotos prüfung");
    std::fs::create_dir_all(&folder).expect("folder");
    let path = folder.join(format!("{stem}.jpg"));
    std::fs::write(&path, fixture_bytes(&format!("pipeline/{stem}.jpg"))).expect("copy");
    path
}

fn assert_same(image: &RgbImage, (shape, rgb): &(Vec<usize>, Vec<u8>), what: &str) {
    assert_eq!(vec![image.height, image.width, 3], *shape, "{what}: shape");
    let differing = image.pixels.iter().zip(rgb).filter(|(a, b)| a != b).count();
    assert_eq!(differing, 0, "{what}: values differing from libjpeg-turbo");
}

#[test]
fn every_fixture_jpeg_decodes_to_exactly_the_opencv_and_pillow_pixels() {
    let fixture = FixtureTensors::load("pipeline/jpeg.safetensors");
    let dir = tempfile::tempdir().expect("temp dir");
    for stem in STEMS {
        let path = copy_fixture(dir.path(), stem);
        // cv2.imread (upright by EXIF), then BGR -> RGB.
        let cv2_rgb = fixture.u8(&format!("{stem}.cv2_rgb"));
        let upright = read_image(&path).expect("decode");
        assert_same(&upright, &cv2_rgb, stem);
        // Image.open(...).convert('RGB'): the stored orientation. Where Pillow's decode equals
        // OpenCV's (the generator checks it), only the OpenCV one is stored.
        let (_, pil_equals_cv2) = fixture.u8(&format!("{stem}.pil_equals_cv2"));
        let pil_rgb = match pil_equals_cv2[..] {
            [1] => cv2_rgb,
            [0] => fixture.u8(&format!("{stem}.pil_rgb")),
            ref other => panic!("{stem}.pil_equals_cv2: {other:?}"),
        };
        let stored = read_image_with(&path, Orientation::AsStored).expect("decode");
        assert_same(&stored, &pil_rgb, stem);
    }
}

#[test]
fn opencv_and_pillow_agree_on_every_upright_fixture_jpeg() {
    // Both link libjpeg-turbo with its default settings (ISLOW IDCT, fancy upsampling); only
    // the EXIF-rotated file differs (Pillow's convert('RGB') does not rotate).
    let fixture = FixtureTensors::load("pipeline/jpeg.safetensors");
    for stem in STEMS {
        let (_, flag) = fixture.u8(&format!("{stem}.pil_equals_cv2"));
        let rotated = stem == "HappyFish_exif6";
        assert_eq!(flag, [u8::from(!rotated)], "{stem}");
    }
    let (shape, _) = fixture.u8("HappyFish_exif6.pil_rgb");
    assert_eq!(shape, [194, 259, 3]);
    let (shape, _) = fixture.u8("HappyFish_exif6.cv2_rgb");
    assert_eq!(shape, [259, 194, 3]);
}

#[test]
fn the_exif_tag_is_read_and_applied_only_when_asked() {
    let rotated = fixture_bytes("pipeline/HappyFish_exif6.jpg");
    let plain = fixture_bytes("pipeline/HappyFish.jpg");
    let jpeg = decode_jpeg(&rotated).expect("decode");
    assert_eq!(jpeg.orientation, Some(6));
    assert_eq!((jpeg.width, jpeg.height), (259, 194), "stored, not rotated");
    assert_eq!(decode_jpeg(&plain).expect("decode").orientation, None);
    // The DataConfig switch reaches the pipeline's reader.
    let config = crate::DataConfig {
        exif_orientation: false,
        ..crate::DataConfig::default()
    };
    assert_eq!(config.image_orientation(), Orientation::AsStored);
    assert_eq!(
        crate::DataConfig::default().image_orientation(),
        Orientation::FromExif
    );
}

#[test]
fn grey_jpegs_become_three_equal_channels() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("grey.jpg");
    image::GrayImage::from_fn(16, 8, |x, _| image::Luma([(x * 16) as u8]))
        .save_with_format(&path, image::ImageFormat::Jpeg)
        .expect("write jpeg");
    let decoded = read_image(&path).expect("grey jpeg");
    assert_eq!((decoded.width, decoded.height), (16, 8));
    for (i, px) in decoded.pixels.chunks_exact(3).enumerate() {
        assert!(px[0] == px[1] && px[1] == px[2], "pixel {i}: {px:?}");
        assert!(
            px[0].abs_diff((i % 16 * 16) as u8) <= 8,
            "pixel {i}: {px:?}"
        );
    }
}

#[test]
fn broken_jpegs_are_decode_errors_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bytes = fixture_bytes("pipeline/HappyFish.jpg");
    for (name, content) in [
        ("header cut.jpg", bytes[..40].to_vec()),
        (
            "garbage.jpg",
            [&[0xFF, 0xD8, 0xFF][..], &[0x17; 64]].concat(),
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        let error = read_image(&path).expect_err(name);
        match &error {
            DataError::Decode { path: p, message } => {
                assert_eq!(p, &path);
                assert!(!message.is_empty());
            }
            other => panic!("{name}: {other}"),
        }
    }
    // A header claiming 65000 x 65000 pixels is refused before anything is allocated.
    let mut huge = bytes.clone();
    let sof = huge
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("baseline frame header");
    // Marker, length (2), precision (1), then height and width (2 each, big-endian).
    huge[sof + 5..sof + 9].copy_from_slice(&[0xFD, 0xE8, 0xFD, 0xE8]);
    let error = decode_jpeg(&huge).err().expect("too large");
    assert!(error.contains("65000x65000"), "{error}");
    // A file cut inside the entropy-coded data still decodes (libjpeg warns and pads with
    // grey), as OpenCV and Pillow do.
    let cut = decode_jpeg(&bytes[..bytes.len() * 2 / 3]).expect("cut in the scan");
    assert_eq!((cut.width, cut.height), (259, 194));
}

#[test]
fn cmyk_becomes_rgb_with_opencvs_formula() {
    // channel' = k - ((255 - channel) * k >> 8)
    assert_eq!(cmyk_to_rgb(&[255, 0, 128, 255]), [255, 1, 129]);
    assert_eq!(cmyk_to_rgb(&[10, 200, 255, 0]), [0, 0, 0]);
    assert_eq!(cmyk_to_rgb(&[0, 100, 255, 100]), [1, 40, 100]);
}

//! The errors a user can run into: each names the file or folder and the numbers involved.

use std::path::Path;

use super::super::*;
use super::{clips, ids_with, root, two_videos, write_frame};
use super::{write_palette_annotation, H, W};
use crate::test_support::{write_png, write_png_with};

fn scan_error(root: &Path) -> VosError {
    VosIndex::new(&VosLayout::new(root), None).unwrap_err()
}

#[test]
fn layout_errors_name_the_folder_or_file() {
    let (_dir, root) = root();
    write_frame(&root, "alpha", "00000", 0);
    let error = scan_error(&root);
    assert!(
        matches!(
            error,
            VosError::MissingFolder {
                what: "Annotations",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("vos daten ü"), "{error}");

    // An Annotations folder without this video's annotations.
    std::fs::create_dir_all(root.join("Annotations")).expect("mkdir");
    let error = scan_error(&root);
    assert!(
        matches!(error, VosError::NoAnnotatedFrame { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("alpha"), "{error}");

    // An annotation whose frame is missing.
    write_palette_annotation(&root, "alpha", "00000", &ids_with(&[1]));
    write_palette_annotation(&root, "alpha", "00007", &ids_with(&[1]));
    let error = scan_error(&root);
    assert!(
        matches!(error, VosError::OrphanAnnotation { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("00007.png"), "{error}");
    std::fs::remove_file(root.join("Annotations/alpha/00007.png")).expect("rm");

    // Two frames with one stem.
    write_png(
        &root.join("JPEGImages/alpha/00000.jpg"),
        W,
        H,
        3,
        &[0; W * H * 3],
    );
    let error = scan_error(&root);
    assert!(matches!(error, VosError::DuplicateStem { .. }), "{error}");
    std::fs::remove_file(root.join("JPEGImages/alpha/00000.jpg")).expect("rm");

    // A video folder without frames.
    std::fs::create_dir_all(root.join("JPEGImages/empty")).expect("mkdir");
    let error = scan_error(&root);
    assert!(matches!(error, VosError::NoFrames { .. }), "{error}");
}

#[test]
fn size_and_format_errors_name_the_file_and_the_numbers() {
    let (_dir, root) = root();
    two_videos(&root);
    // Frame 3 of alpha is 9x6: scanning reads only frame 0, reading a clip with 3 fails.
    let wide = root.join("JPEGImages/alpha/00003.png");
    write_png(&wide, W + 1, H, 3, &[1; (W + 1) * H * 3]);
    let index = VosIndex::new(&VosLayout::new(&root), None).expect("scan");
    let alpha = &index.videos()[0];
    let plan = ClipPlan {
        frames: vec![2, 3],
        object_ids: vec![1],
        reversed: false,
    };
    let error = read_clip(alpha, &plan).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(
            error,
            VosError::FrameSize {
                width: 9,
                height: 6,
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("9x6") && text.contains("8x6"), "{text}");
    assert!(
        text.contains("00003.png") && text.contains("00000.png"),
        "{text}"
    );

    // A 16-bit annotation and an RGB annotation are refused with what they are.
    let sixteen = root.join("Annotations/alpha/00002.png");
    let wide_ids: Vec<u8> = ids_with(&[1]).iter().flat_map(|&v| [0, v]).collect();
    write_png_with(
        &sixteen,
        W,
        H,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        None,
        &wide_ids,
    );
    let error = read_clip(alpha, &plan).unwrap_err();
    assert!(
        matches!(error, VosError::AnnotationFormat { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("16-bit"), "{error}");
    write_png(&sixteen, W, H, 3, &[3; W * H * 3]);
    let error = read_annotation(&sixteen).unwrap_err();
    assert!(error.to_string().contains("Rgb"), "{error}");
    // A JPEG posing as an annotation.
    image::RgbImage::from_pixel(W as u32, H as u32, image::Rgb([1, 1, 1]))
        .save_with_format(&sixteen, image::ImageFormat::Jpeg)
        .expect("jpeg");
    assert!(matches!(
        read_annotation(&sixteen),
        Err(VosError::AnnotationFormat { .. })
    ));

    // A training dataset needs num_frames annotated frames in every video.
    let error = VosDataset::new(index.clone(), clips(6, 3, 0.0), 1).unwrap_err();
    assert!(
        matches!(error, VosError::VideoTooShort { annotated: 5, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("beta"), "{error}");
}

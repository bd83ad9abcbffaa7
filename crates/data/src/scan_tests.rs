//! The whole-split checks of `scan.rs`: every kind of problem, binary-mask hints, the sample data.

use super::*;
use crate::test_support::{cityscapes, small_config, write_png};
use crate::Layout;

#[test]
fn every_problem_of_a_split_is_reported_with_frequencies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let images = cityscapes(dir.path(), "train", "hamburg", 6, 10, 4);
    let label = |image: &std::path::Path| {
        let text = image.display().to_string();
        std::path::PathBuf::from(
            text.replace("leftImg8bit/train", "gtFine/train")
                .replace("_leftImg8bit.png", "_gtFine_labelIds.png"),
        )
    };
    // 1: missing label; 2: truncated image; 3: size mismatch; 4: bad values.
    std::fs::remove_file(label(&images[1])).expect("remove");
    std::fs::write(&images[2], b"\x89PNG\r\n\x1a\n").expect("truncate");
    write_png(&label(&images[3]), 10, 5, 1, &[7; 50]);
    let mut bad = vec![7u8; 40];
    bad[..3].fill(99);
    write_png(&label(&images[4]), 10, 4, 1, &bad);
    let config = small_config(Layout::Cityscapes {
        root: dir.path().to_path_buf(),
    });
    let report = scan_split(&config, "train").expect("a report");
    assert!(!report.is_ok());
    assert_eq!((report.samples, report.good_samples), (5, 2));
    let kinds: Vec<&str> = report
        .problems
        .iter()
        .map(|p| match p {
            DataError::MissingLabel { .. } => "missing",
            DataError::Decode { .. } => "decode",
            DataError::SizeMismatch { .. } => "size",
            DataError::BadLabelValues { .. } => "values",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["missing", "decode", "size", "values"]);
    assert!(report.problems[3]
        .to_string()
        .contains("value 99 on 3 pixels"));
    // Samples 0 and 5 are good: 2 x 40 pixels, road/sidewalk/building/car or void (255).
    let labelled: u64 = report.class_pixels.iter().sum();
    assert_eq!(labelled + report.ignored_pixels, 80);
    assert!(report.class_pixels[0] > 0 && report.class_pixels[13] > 0);
    assert_eq!(report.class_pixels[10], 0, "no sky in the fixtures");
    let text = report.to_string();
    assert!(
        text.contains("5 samples indexed, 2 good, 4 problems"),
        "{text}"
    );
    assert!(text.contains("(absent)"), "{text}");
    let total: f64 = report.class_frequencies().iter().sum();
    assert!((total - 1.0).abs() < 1e-9);
}

/// Five masks as people draw them: three 8-bit 0/255, one anti-aliased {0, 1, 254, 255},
/// one 1-bit. Read as plain indices they are flagged with the setting that fixes them; with
/// `Binary(threshold: 128)` every mask is valid and the 1-bit one is read at brightness.
#[test]
fn binary_masks_are_recognised_and_read_with_a_threshold() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (images, masks) = (dir.path().join("img"), dir.path().join("mask"));
    let half = |fg: u8| -> Vec<u8> { (0..16).map(|i| if i % 4 < 2 { 0 } else { fg }).collect() };
    for k in 0..3 {
        write_png(&images.join(format!("{k}.png")), 4, 4, 3, &[9; 48]);
        write_png(&masks.join(format!("{k}.png")), 4, 4, 1, &half(255));
    }
    write_png(&images.join("3.png"), 4, 4, 3, &[9; 48]);
    let mut anti_aliased = half(255);
    anti_aliased[1] = 1;
    anti_aliased[2] = 254;
    write_png(&masks.join("3.png"), 4, 4, 1, &anti_aliased);
    write_png(&images.join("4.png"), 4, 4, 3, &[9; 48]);
    // 1-bit grey, packed rows: 0b0011_0000 = the right half of 4 pixels is white.
    crate::test_support::write_png_with(
        &masks.join("4.png"),
        4,
        4,
        png::ColorType::Grayscale,
        png::BitDepth::One,
        None,
        &[0b0011_0000; 4],
    );
    let classes = vec!["background".to_string(), "foreground".to_string()];
    let plain = small_config(Layout::folder_pair(
        images.clone(),
        masks.clone(),
        classes.clone(),
    ));
    let report = scan_split(&plain, "x").expect("a report");
    let hint = report
        .problems
        .iter()
        .find(|p| matches!(p, DataError::LooksLikeBinaryMasks { .. }))
        .unwrap_or_else(|| panic!("no binary-mask hint:\n{report}"));
    assert!(
        matches!(
            hint,
            DataError::LooksLikeBinaryMasks {
                files: 1,
                samples: 5,
                ..
            }
        ),
        "{hint:?}"
    );
    let text = hint.to_string();
    assert!(text.contains("values: Binary(threshold: 128)"), "{text}");
    assert!(text.contains("3.png"), "{text}");

    let binary = small_config(Layout::FolderPair {
        images: images.clone(),
        masks: masks.clone(),
        classes,
        values: crate::ValueMap::Binary { threshold: 128 },
        reduce_zero_label: false,
    });
    let report = scan_split(&binary, "x").expect("a report");
    assert!(report.is_ok(), "{report}");
    // 5 masks of 8 + 8 pixels: 1 -> 0 and 254 -> 1 in the anti-aliased one, and the 1-bit
    // mask's 1 is brightness 255 (read as stored, it would be below the threshold).
    assert_eq!(report.class_pixels, [40, 40]);
    assert_eq!(report.ignored_pixels, 0);

    // Only 0/255 (no 1-bit mask telling class 1 apart): every 255 mask is a suspect.
    std::fs::remove_file(masks.join("4.png")).expect("remove");
    std::fs::remove_file(images.join("4.png")).expect("remove");
    let report = scan_split(&plain, "x").expect("a report");
    assert!(
        report.problems.iter().any(|p| matches!(
            p,
            DataError::LooksLikeBinaryMasks {
                files: 4,
                samples: 4,
                ..
            }
        )),
        "{report}"
    );
}

/// Two plain classes with a legitimate ignore region are not mistaken for binary masks.
#[test]
fn index_masks_with_ignore_regions_are_not_flagged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (images, masks) = (dir.path().join("img"), dir.path().join("mask"));
    write_png(&images.join("a.png"), 4, 1, 3, &[9; 12]);
    write_png(&masks.join("a.png"), 4, 1, 1, &[0, 1, 1, 255]);
    write_png(&images.join("b.png"), 4, 1, 3, &[9; 12]);
    write_png(&masks.join("b.png"), 4, 1, 1, &[0, 0, 255, 255]);
    let classes = vec!["background".to_string(), "crack".to_string()];
    let report = scan_split(
        &small_config(Layout::folder_pair(images, masks, classes)),
        "x",
    )
    .expect("a report");
    assert!(report.is_ok(), "{report}");
}

#[test]
fn an_empty_or_missing_split_is_a_problem_not_a_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = small_config(Layout::Cityscapes {
        root: dir.path().join("nowhere"),
    });
    let report = scan_split(&config, "val").expect("a report");
    assert!(!report.is_ok());
    assert_eq!(report.samples, 0);
    assert!(matches!(report.problems[..], [DataError::Io { .. }]));
}

#[test]
fn the_bundled_sample_dataset_is_valid_and_has_every_drawn_class() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
    let config = small_config(Layout::Cityscapes { root });
    for (split, count) in [("train", 48), ("val", 12)] {
        let report = scan_split(&config, split).expect("a report");
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.good_samples, count);
        // road, sidewalk, building, pole, sign, vegetation, sky, person, car.
        for class in [0, 1, 2, 5, 7, 8, 10, 11, 13] {
            assert!(
                report.class_pixels[class] > 0,
                "{split}: class {class}\n{report}"
            );
        }
    }
}

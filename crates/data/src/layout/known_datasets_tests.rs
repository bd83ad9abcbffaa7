//! ADE20K and Pascal VOC 2012: tiny synthetic copies of their released layouts index, decode
//! and map their labels as the official tools define them.

use std::path::Path;

use crate::test_support::{small_config, write_png, write_png_with};
use crate::{DataError, DatasetIndex, Layout, Loader, Mode};

fn write_jpeg(path: &Path, width: u32, height: u32) {
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
    image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([x as u8 * 9, y as u8 * 7, 80])
    })
    .save_with_format(path, image::ImageFormat::Jpeg)
    .expect("jpeg");
}

/// Every label of `split`, in index order, as the validation loader yields them.
fn labels_of(layout: Layout, split: &str) -> (Vec<String>, Vec<Vec<u8>>) {
    let config = small_config(layout);
    let index = DatasetIndex::new(&config.layout, split, 255).expect("index");
    let loader = Loader::new(index, &config, Mode::Validation, 0).expect("loader");
    loader
        .epoch_iter(0, 0)
        .map(|batch| {
            let batch = batch.expect("every sample loads");
            (batch.names[0].clone(), batch.labels)
        })
        .unzip()
}

#[test]
fn ade20k_reduces_zero_label_and_keeps_150_classes() {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = temp.path().join("ADE 20K ü").join("ADEChallengeData2016");
    // Annotation values: 0 (other), 1 (wall), 5 (tree), 150 (flag), 255 (never in ADE, but
    // mmsegmentation maps it to ignore too).
    let raw = [0u8, 1, 5, 150, 255, 1];
    for (split, stem) in [
        ("training", "ADE_train_00000001"),
        ("validation", "ADE_val_00000001"),
    ] {
        write_jpeg(&root.join(format!("images/{split}/{stem}.jpg")), 6, 1);
        write_png(
            &root.join(format!("annotations/{split}/{stem}.png")),
            6,
            1,
            1,
            &raw,
        );
    }
    let layout = Layout::Ade20k { root: root.clone() };
    let index = DatasetIndex::new(&layout, "training", 255).expect("index");
    assert_eq!(index.label_map().num_classes(), 150);
    assert_eq!(index.label_map().classes()[0], "wall");
    assert_eq!(index.label_map().classes()[149], "flag");
    let (names, labels) = labels_of(layout.clone(), "validation");
    assert_eq!(names, ["ADE_val_00000001"]);
    assert_eq!(labels, [vec![255, 0, 4, 149, 255, 0]]);

    // 151 is no ADE20K class.
    write_png(
        &root.join("annotations/training/ADE_train_00000001.png"),
        6,
        1,
        1,
        &[151, 1, 1, 1, 1, 1],
    );
    let config = small_config(layout.clone());
    let index = DatasetIndex::new(&layout, "training", 255).expect("index");
    let error = Loader::new(index, &config, Mode::Validation, 0)
        .expect("loader")
        .load_batch(0, 0)
        .expect_err("151 is no class");
    assert!(
        error.to_string().contains("value 151 on 1 pixel"),
        "{error}"
    );
    // The default split names are not ADE20K's: the message says which are.
    let error = DatasetIndex::new(&layout, "train", 255).expect_err("no `train` split");
    assert!(matches!(
        error,
        DataError::Io { .. } | DataError::EmptySplit { .. }
    ));
}

/// Writes a VOC-style palette PNG (palette index = class) of `indices`.
fn write_palette_png(path: &Path, width: usize, height: usize, indices: &[u8]) {
    let palette: Vec<u8> = (0..=255u8).flat_map(|i| [i, 255 - i, i / 2]).collect();
    write_png_with(
        path,
        width,
        height,
        png::ColorType::Indexed,
        png::BitDepth::Eight,
        Some(palette),
        indices,
    );
}

#[test]
fn pascal_voc_reads_palette_indices_and_the_augmented_list() {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = temp.path().join("VOC devkit 数据").join("VOC2012");
    let sets = root.join("ImageSets/Segmentation");
    std::fs::create_dir_all(&sets).expect("folder");
    std::fs::write(sets.join("train.txt"), "2007_000032\n2007_000039\n").expect("list");
    std::fs::write(sets.join("val.txt"), "2007_000033\n").expect("list");
    // SBD: `aug.txt` with grey labels in SegmentationClassAug/ (one id also in train.txt).
    std::fs::write(sets.join("aug.txt"), "2008_000002\n2007_000039\n").expect("list");
    for (id, indices) in [
        ("2007_000032", [0u8, 1, 255, 20]),
        ("2007_000039", [15, 15, 255, 0]),
        ("2007_000033", [0, 255, 7, 7]),
    ] {
        write_jpeg(&root.join(format!("JPEGImages/{id}.jpg")), 4, 1);
        write_palette_png(
            &root.join(format!("SegmentationClass/{id}.png")),
            4,
            1,
            &indices,
        );
    }
    write_jpeg(&root.join("JPEGImages/2008_000002.jpg"), 4, 1);
    write_png(
        &root.join("SegmentationClassAug/2008_000002.png"),
        4,
        1,
        1,
        &[3, 3, 0, 0],
    );
    write_png(
        &root.join("SegmentationClassAug/2007_000039.png"),
        4,
        1,
        1,
        &[9, 9, 0, 0],
    );

    let layout = Layout::PascalVoc { root: root.clone() };
    let (names, labels) = labels_of(layout.clone(), "train");
    assert_eq!(names, ["2007_000032", "2007_000039"]);
    assert_eq!(labels, [vec![0, 1, 255, 20], vec![15, 15, 255, 0]]);
    let (names, labels) = labels_of(layout.clone(), "val");
    assert_eq!(
        (names, labels),
        (vec!["2007_000033".to_string()], vec![vec![0, 255, 7, 7]])
    );
    let index = DatasetIndex::new(&layout, "val", 255).expect("index");
    assert_eq!(index.label_map().num_classes(), 21);
    assert_eq!(index.label_map().classes()[15], "person");

    // train+aug concatenates both lists, each with its own label folder (sorted by image).
    let (names, labels) = labels_of(layout.clone(), "train+aug");
    assert_eq!(
        names,
        ["2007_000032", "2007_000039", "2007_000039", "2008_000002"]
    );
    let mut from_both: Vec<Vec<u8>> = labels[1..3].to_vec();
    from_both.sort();
    assert_eq!(from_both, [vec![9, 9, 0, 0], vec![15, 15, 255, 0]]);
    assert_eq!(labels[3], [3, 3, 0, 0]);

    // A listed id without its files is reported with the list and line.
    std::fs::write(sets.join("val.txt"), "2007_000033\n2099_000001\n").expect("list");
    let error = DatasetIndex::new(&layout, "val", 255).expect_err("missing id");
    match error {
        DataError::MissingListedFile { list, line, path } => {
            assert!(list.ends_with("val.txt") && line == 2, "{list:?} {line}");
            assert!(path.ends_with("JPEGImages/2099_000001.jpg"), "{path:?}");
        }
        other => panic!("unexpected {other}"),
    }
}

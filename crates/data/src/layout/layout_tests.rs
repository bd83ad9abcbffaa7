//! Every layout indexes and loads a tiny dataset written on the fly; every indexing error.

use std::path::Path;

use crate::test_support::{cityscapes, fixture_colour, small_config, striped, write_png};
use crate::{DataError, DatasetIndex, LabelEncoding, Layout, Loader, Mode};

/// Loads the whole split as validation batches and checks names, shapes and label values.
fn load_all(layout: Layout, split: &str, expected_names: &[&str], num_classes: usize) {
    let config = small_config(layout);
    let index = DatasetIndex::new(&config.layout, split, 255).expect("index");
    let names: Vec<&str> = index.samples().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, expected_names);
    assert_eq!(index.label_map().num_classes(), num_classes);
    let loader = Loader::new(index, &config, Mode::Validation, 0).expect("loader");
    let batches: Vec<_> = loader
        .epoch_iter(0, 0)
        .collect::<Result<_, _>>()
        .expect("every sample loads");
    assert_eq!(batches.len(), expected_names.len());
    for batch in &batches {
        assert!(batch
            .labels
            .iter()
            .all(|&l| usize::from(l) < num_classes || l == 255));
        assert_eq!(batch.images.len(), 3 * batch.labels.len());
    }
}

#[test]
fn cityscapes_indexes_cities_in_order_and_maps_label_ids() {
    let dir = tempfile::tempdir().expect("temp dir");
    cityscapes(dir.path(), "train", "zurich", 2, 20, 10);
    cityscapes(dir.path(), "train", "aachen", 1, 20, 10);
    cityscapes(dir.path(), "val", "lindau", 1, 20, 10);
    let layout = Layout::Cityscapes {
        root: dir.path().to_path_buf(),
    };
    load_all(
        layout.clone(),
        "train",
        &[
            "aachen_000000_000019",
            "zurich_000000_000019",
            "zurich_000001_000019",
        ],
        19,
    );
    load_all(layout.clone(), "val", &["lindau_000000_000019"], 19);
    let index = DatasetIndex::new(&layout, "val", 255).expect("index");
    assert!(index.samples()[0].image.is_absolute());
    assert_eq!(
        index.label_map().description(),
        "Cityscapes labelIds 0..=33"
    );
}

#[test]
fn cityscapes_prefers_train_id_files_when_present() {
    let dir = tempfile::tempdir().expect("temp dir");
    cityscapes(dir.path(), "train", "bonn", 1, 8, 4);
    let label_dir = dir.path().join("gtFine/train/bonn");
    write_png(
        &label_dir.join("bonn_000000_000019_gtFine_labelTrainIds.png"),
        8,
        4,
        1,
        &[13; 32],
    );
    let layout = Layout::Cityscapes {
        root: dir.path().to_path_buf(),
    };
    let index = DatasetIndex::new(&layout, "train", 255).expect("index");
    assert!(index.samples()[0]
        .label
        .ends_with("bonn_000000_000019_gtFine_labelTrainIds.png"));
    let config = small_config(layout);
    let loader = Loader::new(index, &config, Mode::Validation, 0).expect("loader");
    let batch = loader.load_batch(0, 0).expect("batch");
    assert!(
        batch.labels.iter().all(|&l| l == 13),
        "trainIds are used as they are"
    );
}

#[test]
fn camvid_maps_colour_labels() {
    let dir = tempfile::tempdir().expect("temp dir");
    let palette = crate::labels::CAMVID_PALETTE;
    for (i, stem) in ["0001TP_006690", "Seq05VD_f00000"].iter().enumerate() {
        let (image, classes) = striped(12, 6, 2 + i, &[0, 6, 9, 10], fixture_colour);
        let label_rgb: Vec<u8> = classes
            .iter()
            .flat_map(|&c| palette[usize::from(c)])
            .collect();
        write_png(
            &dir.path().join(format!("val/{stem}.png")),
            12,
            6,
            3,
            &image,
        );
        write_png(
            &dir.path().join(format!("val_labels/{stem}_L.png")),
            12,
            6,
            3,
            &label_rgb,
        );
    }
    let layout = Layout::CamVid {
        root: dir.path().to_path_buf(),
        images: "{split}".into(),
        labels: "{split}_labels".into(),
        label_suffix: "_L".into(),
    };
    load_all(
        layout.clone(),
        "val",
        &["0001TP_006690", "Seq05VD_f00000"],
        11,
    );
    let config = small_config(layout);
    let index = DatasetIndex::new(&config.layout, "val", 255).expect("index");
    let loader = Loader::new(index, &config, Mode::Validation, 0).expect("loader");
    let batch = loader.load_batch(0, 0).expect("batch");
    let mut seen: Vec<u8> = batch.labels.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, [0, 6, 9, 10]);
}

#[test]
fn list_files_accept_tabs_spaces_comments_and_report_bad_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("data");
    let images = cityscapes(&root, "train", "ulm", 2, 10, 6);
    let rel = |p: &Path| {
        p.strip_prefix(&root)
            .expect("under root")
            .display()
            .to_string()
    };
    let label_of = |p: &Path| {
        rel(p)
            .replace("leftImg8bit/", "gtFine/")
            .replace("_leftImg8bit.png", "_gtFine_labelIds.png")
    };
    let list = dir.path().join("lists/train.lst");
    std::fs::create_dir_all(list.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &list,
        format!(
            "# official format\n{}\t{}\n\n{}   {}\r\n",
            rel(&images[0]),
            label_of(&images[0]),
            rel(&images[1]),
            label_of(&images[1])
        ),
    )
    .expect("write list");
    let layout = Layout::ListFile {
        root: root.clone(),
        list: dir.path().join("lists/{split}.lst"),
        labels: LabelEncoding::CityscapesLabelIds,
    };
    load_all(
        layout.clone(),
        "train",
        &["ulm_000000_000019", "ulm_000001_000019"],
        19,
    );

    std::fs::write(
        &list,
        "only_one_field.png\nmissing.png gtFine/missing.png\n",
    )
    .expect("write");
    let scan = layout.scan("train");
    assert!(scan.samples.is_empty());
    assert_eq!(scan.problems.len(), 3, "{:?}", scan.problems);
    assert!(matches!(
        &scan.problems[0],
        DataError::ListSyntax { line: 1, .. }
    ));
    assert!(
        matches!(&scan.problems[1], DataError::MissingListedFile { line: 2, path, .. } if path.ends_with("missing.png"))
    );
    let error = DatasetIndex::new(&layout, "train", 255).expect_err("bad list");
    assert!(error.to_string().contains("train.lst, line 1"), "{error}");
}

#[test]
fn folder_pairs_match_by_stem_and_report_missing_masks() {
    let dir = tempfile::tempdir().expect("temp dir");
    for stem in ["b", "a"] {
        let (image, label) = striped(8, 8, 2, &[0, 1, 2, 255], fixture_colour);
        write_png(
            &dir.path().join(format!("images/{stem}.png")),
            8,
            8,
            3,
            &image,
        );
        write_png(
            &dir.path().join(format!("masks/{stem}.png")),
            8,
            8,
            1,
            &label,
        );
    }
    let jpeg = image::RgbImage::from_pixel(8, 8, image::Rgb([9, 9, 9]));
    jpeg.save_with_format(dir.path().join("images/c.jpg"), image::ImageFormat::Jpeg)
        .expect("jpeg");
    write_png(&dir.path().join("masks/c.png"), 8, 8, 1, &[1; 64]);
    std::fs::write(dir.path().join("images/readme.txt"), "not an image").expect("write");
    let layout = Layout::folder_pair(
        dir.path().join("images"),
        dir.path().join("masks"),
        vec!["bg".into(), "road".into(), "car".into()],
    );
    load_all(layout.clone(), "train", &["a", "b", "c"], 3);

    write_png(&dir.path().join("images/d.png"), 8, 8, 3, &[0; 192]);
    let error = DatasetIndex::new(&layout, "train", 255).expect_err("d has no mask");
    match error {
        DataError::MissingLabel { image, expected } => {
            assert!(image.ends_with("images/d.png"));
            assert!(expected.ends_with("masks/d.png"));
        }
        other => panic!("wrong error: {other}"),
    }
}

#[test]
fn missing_labels_and_empty_splits_name_what_is_missing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let images = cityscapes(dir.path(), "train", "jena", 2, 8, 4);
    let layout = Layout::Cityscapes {
        root: dir.path().to_path_buf(),
    };
    std::fs::create_dir_all(dir.path().join("leftImg8bit/val/empty_city")).expect("mkdir");
    let error = DatasetIndex::new(&layout, "val", 255).expect_err("empty");
    assert!(matches!(error, DataError::EmptySplit { ref split, .. } if split == "val"));
    assert!(error.to_string().contains("leftImg8bit/val"), "{error}");

    let error = DatasetIndex::new(&layout, "test", 255).expect_err("no folder");
    assert!(matches!(error, DataError::Io { ref path, .. } if path.ends_with("leftImg8bit/test")));

    let label = dir
        .path()
        .join("gtFine/train/jena/jena_000001_000019_gtFine_labelIds.png");
    std::fs::remove_file(&label).expect("remove");
    let error = DatasetIndex::new(&layout, "train", 255).expect_err("missing label");
    match &error {
        DataError::MissingLabel { image, expected } => {
            assert_eq!(image, &images[1]);
            assert_eq!(expected, &label);
        }
        other => panic!("wrong error: {other}"),
    }
}

#[test]
fn paths_with_spaces_and_non_ascii_work_end_to_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("données d'essai").join("数据");
    cityscapes(&root, "train", "köln", 4, 30, 20);
    let layout = Layout::Cityscapes { root: root.clone() };
    let mut config = small_config(layout);
    config.train_loader.batch_size = 2;
    let index = DatasetIndex::new(&config.layout, "train", 255).expect("index");
    assert_eq!(index.len(), 4);
    assert!(index.samples()[0].image.starts_with(&root));
    let loader = Loader::new(index, &config, Mode::Train, 7).expect("loader");
    let batch = loader.load_batch(0, 0).expect("a training batch");
    assert_eq!(batch.image_shape(), [2, 3, 16, 24]);
    assert!(batch.names.iter().all(|n| n.starts_with("köln_")));

    // Errors show the path as it is, not escaped.
    let broken = root.join("leftImg8bit/train/köln/köln_000002_000019_leftImg8bit.png");
    std::fs::write(&broken, b"\x89PNG\r\n\x1a\ntruncated").expect("write");
    let errors: Vec<String> = (0..2)
        .filter_map(|b| loader.load_batch(0, b).err())
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("données d'essai/数据/leftImg8bit/train/köln/köln_000002"),
        "{}",
        errors[0]
    );
}

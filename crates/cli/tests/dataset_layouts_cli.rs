//! Datasets as users have them, driven through `train` like a user: 0/255 binary masks (which
//! `--check-data` recognises and `values: Binary(threshold: 128)` reads), and tiny synthetic
//! copies of the ADE20K and Pascal VOC 2012 layouts. Each checks its data, then trains two
//! steps and validates; the binary run also computes its class weights from the data and
//! records them in its checkpoint.

use std::path::{Path, PathBuf};
use std::process::Output;

use segburn::experiment::PidNetExperiment;
use segburn_train::checkpoint::{load_checkpoint, CheckpointDir};

mod common;
use common::text;

fn train(args: &[&str]) -> Output {
    common::run(env!("CARGO_BIN_EXE_train"), args)
}

/// A scratch directory whose name has spaces and non-ASCII characters.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("jeux de données").join("数据");
    std::fs::create_dir_all(&dir).unwrap();
    (root, dir)
}

/// A 48x40 photo-like image: a bright disc (the object) on a dark background.
fn write_photo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::RgbImage::from_fn(48, 40, |x, y| {
        let inside = disc(x, y) > 0.5;
        image::Rgb(if inside {
            [230, 200, 40]
        } else {
            [20, 40, 60 + (x as u8)]
        })
    })
    .save_with_format(path, image::ImageFormat::Jpeg)
    .unwrap();
}

/// Coverage of pixel `(x, y)` by the disc, in `[0, 1]` (1 inside, 0 outside, between at the
/// edge: what an anti-aliased mask stores).
fn disc(x: u32, y: u32) -> f32 {
    let distance = ((x as f32 - 24.0).powi(2) + (y as f32 - 20.0).powi(2)).sqrt();
    (12.5 - distance).clamp(0.0, 1.0)
}

fn write_grey(path: &Path, value: impl Fn(u32, u32) -> u8) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::GrayImage::from_fn(48, 40, |x, y| image::Luma([value(x, y)]))
        .save(path)
        .unwrap();
}

/// An experiment for 32x32 crops, batches of 2, two steps and a validation at the end (a
/// small learning rate: two steps of a fresh model on 32-pixel crops are not about
/// convergence, and lr 0.01 with the data's class weights overflowed at step 1).
fn experiment(dir: &Path, name: &str, model: &str, data: &str, loss: &str) -> String {
    let run_dir = dir.join(format!("run {name}"));
    let body = format!(
        "(\n  model: {model},\n  data: (\n    {data},\n    \
         augment: (base_size: 48, crop_height: 32, crop_width: 32),\n    \
         train_loader: (batch_size: 2, num_workers: 1),\n    val_loader: (num_workers: 1),\n  ),\n  \
         loss: (ohem: (min_kept: 100), {loss}),\n  \
         train: (epochs: 1, max_steps: Some(2), lr: 0.001, validate_every_epochs: 0, \
         validate_at_end: true, log_every_steps: 1, run_dir: {:?}),\n  device: Cpu,\n)\n",
        run_dir.display().to_string()
    );
    let path = dir.join(format!("{name}.ron"));
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

fn assert_success(output: &Output) {
    assert!(output.status.success(), "{}", text(output));
}

/// `--check-data` passes, then the run trains, validates and saves a checkpoint.
fn check_and_train(config: &str) -> String {
    assert_success(&train(&[config, "--check-data"]));
    let output = train(&[config, "--quiet"]);
    assert_success(&output);
    let all = text(&output);
    assert!(all.contains("finished at step 2"), "{all}");
    assert!(all.contains("validation mIoU"), "{all}");
    all
}

#[test]
fn binary_masks_are_named_by_check_data_and_train_with_a_threshold() {
    let (_root, dir) = scratch();
    let data = dir.join("masks drawn by hand");
    for (split, count) in [("train", 4), ("val", 2)] {
        for k in 0..count {
            write_photo(&data.join(format!("images/{split}/{k}.jpg")));
            // Anti-aliased 0..=255 masks, foreground 255.
            write_grey(&data.join(format!("masks/{split}/{k}.png")), |x, y| {
                (disc(x, y) * 255.0).round() as u8
            });
        }
    }
    let layout = |values: &str| {
        format!(
            "layout: FolderPair(images: {:?}, masks: {:?}, classes: [\"background\", \
             \"object\"]{values})",
            data.join("images/{split}").display().to_string(),
            data.join("masks/{split}").display().to_string()
        )
    };
    let model = "(size: S, num_classes: 2)";
    let plain = experiment(&dir, "plain", model, &layout(""), "class_weights: Uniform");
    let output = train(&[&plain, "--check-data"]);
    let all = text(&output);
    assert!(!output.status.success(), "{all}");
    assert!(all.contains("look like 8-bit binary masks"), "{all}");
    assert!(all.contains("values: Binary(threshold: 128)"), "{all}");

    let binary = experiment(
        &dir,
        "binary",
        model,
        &layout(", values: Binary(threshold: 128)"),
        "class_weights: FromData()",
    );
    let all = check_and_train(&binary);
    assert!(
        all.contains("class weights from the training split"),
        "{all}"
    );

    // The weights are recorded in the run's resolved experiment, in its checkpoint.
    let run = CheckpointDir::new(dir.join("run binary").join("checkpoints"));
    let checkpoint = load_checkpoint(&run.latest().expect("a checkpoint")).unwrap();
    let saved: PidNetExperiment = ron::de::from_str(&checkpoint.meta.config).unwrap();
    let weights = saved.loss.class_weights.values().expect("computed weights");
    assert_eq!(weights.len(), 2);
    // The object covers ~26 % of the pixels: it weighs more than the background.
    assert!(weights[1] > weights[0] && weights[0] > 1.0, "{weights:?}");
}

#[test]
fn an_ade20k_copy_trains_with_reduce_zero_label() {
    let (_root, dir) = scratch();
    let root = dir.join("ADEChallengeData2016");
    for (split, count) in [("training", 4), ("validation", 2)] {
        for k in 0..count {
            let stem = format!("ADE_{split}_{k:08}");
            write_photo(&root.join(format!("images/{split}/{stem}.jpg")));
            // 0 (other, ignored) around, wall (1) and flag (150) inside.
            write_grey(
                &root.join(format!("annotations/{split}/{stem}.png")),
                |x, y| match (disc(x, y) > 0.5, x < 24) {
                    (false, _) => 0,
                    (true, true) => 1,
                    (true, false) => 150,
                },
            );
        }
    }
    let config = experiment(
        &dir,
        "ade20k",
        "(size: S, num_classes: 150)",
        &format!(
            "layout: Ade20k(root: {:?}), train_split: \"training\", val_split: \"validation\"",
            root.display().to_string()
        ),
        "class_weights: Uniform",
    );
    check_and_train(&config);
}

#[test]
fn a_pascal_voc_copy_trains_with_palette_labels_and_the_augmented_list() {
    let (_root, dir) = scratch();
    let root = dir.join("VOCdevkit").join("VOC2012");
    let sets = root.join("ImageSets/Segmentation");
    std::fs::create_dir_all(&sets).unwrap();
    std::fs::write(sets.join("train.txt"), "2007_000001\n2007_000002\n").unwrap();
    std::fs::write(sets.join("val.txt"), "2007_000003\n").unwrap();
    std::fs::write(sets.join("aug.txt"), "2008_000001\n2008_000002\n").unwrap();
    // VOC's palette: class k has the bit-interleaved colour, 255 (the border) is cream.
    let palette: Vec<u8> = (0..=255u32)
        .flat_map(|k| {
            if k == 255 {
                [224, 224, 192]
            } else {
                [(k * 40) as u8, 0, 128]
            }
        })
        .collect();
    let label = |x: u32, y: u32| -> u8 {
        let d = disc(x, y);
        if d >= 1.0 {
            15 // person
        } else if d > 0.0 {
            255 // the ignored border
        } else {
            0
        }
    };
    for id in ["2007_000001", "2007_000002", "2007_000003"] {
        write_photo(&root.join(format!("JPEGImages/{id}.jpg")));
        let indices: Vec<u8> = (0..40)
            .flat_map(|y| (0..48).map(move |x| (x, y)))
            .map(|(x, y)| label(x, y))
            .collect();
        let path = root.join(format!("SegmentationClass/{id}.png"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut encoder = png::Encoder::new(file, 48, 40);
        encoder.set_color(png::ColorType::Indexed);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_palette(palette.clone());
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&indices).unwrap();
    }
    for id in ["2008_000001", "2008_000002"] {
        write_photo(&root.join(format!("JPEGImages/{id}.jpg")));
        write_grey(&root.join(format!("SegmentationClassAug/{id}.png")), label);
    }
    let config = experiment(
        &dir,
        "voc",
        "(size: S, num_classes: 21)",
        &format!(
            "layout: PascalVoc(root: {:?}), train_split: \"train+aug\", val_split: \"val\"",
            root.display().to_string()
        ),
        "class_weights: Uniform",
    );
    check_and_train(&config);
}

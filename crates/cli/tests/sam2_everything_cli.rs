//! `predict-sam2 --everything` with an official-format checkpoint (the reduced fixture model)
//! in a folder whose name has spaces and non-ASCII characters: the files it writes hold the
//! library generator's masks, and prompts beside `--everything` are refused.

mod common;

use std::path::Path;

use burn::backend::flex::FlexDevice;
use common::official::{official_files, official_model, predict_args};
use common::{fixture, run, text};
use segburn_data::decode::read_image;
use segburn_models::sam2::automatic::{AutomaticMaskGenerator, AutomaticMaskGeneratorConfig, Rle};
use serde_json::Value;

const PREDICT: &str = env!("CARGO_BIN_EXE_predict-sam2");

/// A grid small enough for a test, thresholds low enough that the reduced model keeps masks.
const GRID: [&str; 6] = [
    "--points-per-side",
    "4",
    "--pred-iou-thresh",
    "0.0",
    "--stability-score-thresh",
    "0.0",
];

#[test]
fn everything_writes_the_library_generators_masks() {
    let dir = tempfile::Builder::new()
        .prefix("segburn everything ü ")
        .tempdir()
        .expect("temporary folder");
    let (checkpoint, config) = official_files(dir.path());
    let photo = dir.path().join("photo ß.png");
    std::fs::copy(fixture("sam2_hiera/image.png"), &photo).expect("copy the photo");
    let out = dir.path().join("out ö");
    let mut args = predict_args(&checkpoint, &config, &photo, &out);
    args.push("--everything".as_ref());
    args.extend(GRID.iter().map(std::ffi::OsStr::new));
    let output = run(PREDICT, &args);
    assert!(output.status.success(), "{}", text(&output));

    let records_file = out.join("photo ß_masks.json");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&records_file).expect("the records file"))
            .expect("JSON records");
    let written = written.as_array().expect("a list of records");
    let expected = library_records(&checkpoint, &photo);
    assert!(!expected.is_empty(), "the test needs masks to compare");
    assert_eq!(written.len(), expected.len(), "mask count");
    for (i, (record, (area, rle))) in written.iter().zip(&expected).enumerate() {
        assert_eq!(record["area"].as_u64(), Some(*area), "record {i} area");
        let counts = record["segmentation"]["counts"].as_str().expect("COCO RLE");
        assert_eq!(counts, rle, "record {i} mask");
        assert!(
            out.join("photo ß_masks")
                .join(format!("{i:04}.png"))
                .is_file(),
            "mask PNG {i}"
        );
    }
    assert!(out.join("photo ß_everything.png").is_file(), "the overlay");
}

#[test]
fn prompts_beside_everything_are_refused() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let (checkpoint, _) = official_files(dir.path());
    let output = run(
        PREDICT,
        &[
            "--checkpoint".as_ref(),
            checkpoint.as_os_str(),
            fixture("sam2_hiera/image.png").as_os_str(),
            "--out".as_ref(),
            dir.path().as_os_str(),
            "--everything".as_ref(),
            "--points".as_ref(),
            "10,10,1".as_ref(),
        ],
    );
    assert!(!output.status.success());
    assert!(
        text(&output).contains("leave out --points, --box and --mask-input"),
        "{}",
        text(&output)
    );
}

/// `(area, COCO counts)` of each record of the library generator with the test's grid.
fn library_records(checkpoint: &Path, photo: &Path) -> Vec<(u64, String)> {
    let model = official_model(checkpoint);
    let image = read_image(photo).unwrap_or_else(|e| panic!("{e}"));
    let config = AutomaticMaskGeneratorConfig::new()
        .with_points_per_side(4)
        .with_pred_iou_thresh(0.0)
        .with_stability_score_thresh(0.0);
    let generator = AutomaticMaskGenerator::new(&model, config).expect("generator");
    generator
        .generate(&image.pixels, [image.height, image.width], &FlexDevice)
        .expect("masks")
        .into_iter()
        .map(|record| {
            let counts = Rle::to_coco_string(&record.segmentation);
            (record.area, counts)
        })
        .collect()
}

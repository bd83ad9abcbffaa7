//! "Segment everything" against the official `SAM2AutomaticMaskGenerator`: the reduced SAM 2.1
//! model (formula weights) on the 240×320 synthetic image, two settings
//! (`tests/fixtures/sam2_automatic/README.md`). Official record `i` must be segburn record `i`
//! (same count, same order: a one-to-one match) with mask IoU ≥ 0.99, the same click and crop,
//! and scores within f32 noise. (Nearly equal masks do occur: refined masks of neighbouring
//! clicks converge, so "the closest mask" would not be a unique match; the position is.)

mod sam2_hiera_support;

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::DType;
use segburn_models::fixtures::fixture_path;
use segburn_models::sam2::automatic::{
    AutomaticMaskGenerator, AutomaticMaskGeneratorConfig, MaskRecord, Rle,
};
use serde_json::Value;

type B = Flex;

/// Mask IoU below which two masks are different masks.
const MIN_IOU: f64 = 0.99;
/// The decoder's IoU head: f32 noise only (the pipeline fixture's tolerance is 2e-5).
const IOU_TOL: f64 = 1e-4;
/// A stability score moves by 1/union for each pixel whose logit crosses ±1 by noise; a few
/// pixels of ~10⁴ is ~1e-3.
const STABILITY_TOL: f64 = 2e-3;

fn load(name: &str) -> Value {
    let path =
        fixture_path(&format!("sam2_automatic/{name}.json")).unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn config(settings: &Value) -> AutomaticMaskGeneratorConfig {
    let int = |key: &str| settings[key].as_u64().unwrap_or_else(|| panic!("{key}")) as usize;
    let float = |key: &str| settings[key].as_f64().unwrap_or_else(|| panic!("{key}"));
    let flag = |key: &str| settings[key].as_bool().unwrap_or_else(|| panic!("{key}"));
    AutomaticMaskGeneratorConfig::new()
        .with_points_per_side(int("points_per_side"))
        .with_points_per_batch(int("points_per_batch"))
        .with_pred_iou_thresh(float("pred_iou_thresh"))
        .with_stability_score_thresh(float("stability_score_thresh"))
        .with_stability_score_offset(float("stability_score_offset"))
        .with_mask_threshold(float("mask_threshold"))
        .with_box_nms_thresh(float("box_nms_thresh"))
        .with_crop_n_layers(int("crop_n_layers"))
        .with_crop_nms_thresh(float("crop_nms_thresh"))
        .with_crop_overlap_ratio(float("crop_overlap_ratio"))
        .with_crop_n_points_downscale_factor(int("crop_n_points_downscale_factor"))
        .with_min_mask_region_area(int("min_mask_region_area"))
        .with_multimask_output(flag("multimask_output"))
        .with_use_m2m(flag("use_m2m"))
}

fn numbers(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}

fn mask_iou(a: &Rle, b: &Rle) -> f64 {
    let (a, b) = (a.decode(), b.decode());
    let both = a
        .data
        .iter()
        .zip(&b.data)
        .filter(|(x, y)| **x && **y)
        .count();
    let either = a
        .data
        .iter()
        .zip(&b.data)
        .filter(|(x, y)| **x || **y)
        .count();
    // Two empty masks are the same mask (the clean-up can empty a mask, and without a
    // stability filter it stays a record).
    if either == 0 {
        return 1.0;
    }
    both as f64 / either as f64
}

/// segburn's records for the fixture `name`, with its settings changed by `adjust`.
fn generate(
    fixture: &Value,
    adjust: impl Fn(AutomaticMaskGeneratorConfig) -> AutomaticMaskGeneratorConfig,
) -> Vec<MaskRecord> {
    let device = FlexDevice;
    let model = sam2_hiera_support::load_model::<B>(&device, DType::F32);
    let image = sam2_hiera_support::fixture("pipeline.safetensors");
    let rgb = image
        .data("image_u8")
        .expect("image_u8")
        .as_bytes()
        .to_vec();
    let size = [240, 320];
    let generator = AutomaticMaskGenerator::new(&model, adjust(config(&fixture["settings"])))
        .expect("valid settings");
    generator.generate(&rgb, size, &device).expect("generates")
}

fn check(name: &str) {
    let fixture = load(name);
    let size = [240, 320];
    let ours = generate(&fixture, |c| c);
    let official = fixture["records"].as_array().expect("records");
    assert_eq!(ours.len(), official.len(), "{name}: number of masks");
    // [lowest mask IoU, largest predicted-IoU difference, largest stability difference]
    let mut worst = [1.0f64, 0.0, 0.0];
    for (i, (mine, theirs)) in ours.iter().zip(official).enumerate() {
        let counts = numbers(&theirs["counts"])
            .iter()
            .map(|&c| c as u32)
            .collect();
        let rle = Rle { size, counts };
        let iou = mask_iou(&mine.segmentation, &rle);
        worst[0] = worst[0].min(iou);
        // Position i: the same mask, so the NMS orders agree too.
        assert!(
            iou >= MIN_IOU,
            "{name} record {i}: mask IoU {iou:.4} with the official one"
        );
        let point: Vec<f64> = mine.point_coords.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(
            point,
            numbers(&theirs["point_coords"]),
            "{name} record {i}: click"
        );
        let crop: Vec<f64> = mine.crop_box.iter().map(|&v| v as f64).collect();
        assert_eq!(
            crop,
            numbers(&theirs["crop_box"]),
            "{name} record {i}: crop box"
        );
        let iou_pred = theirs["predicted_iou"].as_f64().expect("predicted_iou");
        worst[1] = worst[1].max((f64::from(mine.predicted_iou) - iou_pred).abs());
        assert!(
            (f64::from(mine.predicted_iou) - iou_pred).abs() <= IOU_TOL,
            "{name} record {i}: predicted IoU {} vs {iou_pred}",
            mine.predicted_iou
        );
        let stability = theirs["stability_score"].as_f64().expect("stability_score");
        worst[2] = worst[2].max((f64::from(mine.stability_score) - stability).abs());
        assert!(
            (f64::from(mine.stability_score) - stability).abs() <= STABILITY_TOL,
            "{name} record {i}: stability {} vs {stability}",
            mine.stability_score
        );
        let area = theirs["area"].as_f64().expect("area");
        assert!(
            (mine.area as f64 - area).abs() <= area * (1.0 - MIN_IOU),
            "{name} record {i}: area {} vs {area}",
            mine.area
        );
    }
    println!(
        "{name}: {} masks, lowest mask IoU {:.5}, predicted IoU within {:.1e}, stability within {:.1e}",
        ours.len(),
        worst[0],
        worst[1],
        worst[2]
    );
}

#[test]
fn filtered_run_matches_the_official_generator() {
    check("filtered");
}

#[test]
fn unfiltered_run_matches_the_official_generator() {
    check("unfiltered");
}

#[test]
fn mask_refinement_matches_the_official_generator() {
    check("m2m");
}

/// `min_mask_region_area` 4: the official clean-up runs through a CPU stand-in for its CUDA
/// connected components (see the fixture's README).
#[test]
fn small_region_removal_matches_the_official_generator() {
    check("cleanup");
}

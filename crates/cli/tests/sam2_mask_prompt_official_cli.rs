//! `predict-sam2 --mask-input` against the official `SAM2ImagePredictor` (issue 39): the reduced
//! fixture model as an official-format checkpoint, the fixture's 240×320 PNG, and the mask
//! prompts of `tests/fixtures/sam2_hiera/pipeline.safetensors` (a mask alone, with two clicks,
//! with one click and three proposals). The `<stem>_low_res.safetensors` the command writes
//! must be the official low-res logits of the mask it keeps, in f32 and, with `--precision f64`,
//! in f64 (`pipeline_f64.safetensors:f64_pixels.*`: the official modules in f64 on the image
//! preprocessed in f64, as `--precision f64` preprocesses it).

mod common;

use std::ffi::OsStr;
use std::path::Path;

use burn::tensor::DType;
use common::official::{official_files, predict_args};
use common::{fixture, run, text};
use segburn_models::fixtures::{max_abs, max_abs_diff, rel_l2, Fixture};
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};

const PREDICT: &str = env!("CARGO_BIN_EXE_predict-sam2");

/// Per unit of max(1, max |official|), as the library's f32 test
/// (`crates/models/tests/sam2_mask_prompt_official.rs`): measured there ≤ 2.5e-6.
const F32_TOL: f64 = 1e-5;
/// Relative L2 against the official f64 run, as the library's f64 test (measured there
/// ≤ 1.3e-14).
const F64_REL_L2: f64 = 1e-10;

/// (case, `--points`, proposals the command makes under `--multimask auto`)
const CASES: [(&str, Option<&str>, usize); 3] = [
    ("mask", None, 1),
    ("mask_points", Some("167,58,1;260,195,0"), 1),
    ("mask_formula_point", Some("260,190,1"), 3),
];

fn values(f: &Fixture, key: &str) -> Vec<f64> {
    f.values_f64(key).unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// Writes the case's `mask_input` as the one tensor of a safetensors file, as a previous run's
/// `<stem>_low_res.safetensors` holds it.
fn write_mask_input(f: &Fixture, case: &str, path: &Path) {
    let data = f.data(&format!("{case}.mask_input")).expect("mask_input");
    let tensors: NamedTensors = [("low_res_mask".to_string(), data)].into_iter().collect();
    let bytes = serialize_safetensors(&tensors, None, path).expect("serialise");
    std::fs::write(path, bytes).expect("write the mask input");
}

#[test]
fn mask_input_gives_the_official_low_res_logits() {
    mask_input_matches_official("f32");
}

#[test]
fn mask_input_in_f64_gives_the_official_f64_low_res_logits() {
    mask_input_matches_official("f64");
}

/// Half precisions against the official f32 logits, with the per-unit bounds of the library's
/// prompt-form test (`crates/models/tests/sam2_prompt_forms.rs`, set from its measured
/// half-vs-f32 spread: f16 ≤ 1.9e-2, bf16 ≤ 9.1e-2).
#[test]
fn mask_input_in_half_precision_stays_within_its_rounding() {
    mask_input_matches_official("f16");
    mask_input_matches_official("bf16");
}

fn mask_input_matches_official(precision: &str) {
    let dir = tempfile::Builder::new()
        .prefix("segburn mask ü ")
        .tempdir()
        .expect("temporary folder");
    let (checkpoint, config) = official_files(dir.path());
    let photo = dir.path().join("photo ß.png");
    std::fs::copy(fixture("sam2_hiera/image.png"), &photo).expect("copy the image");
    let f = Fixture::load("sam2_hiera/pipeline.safetensors").unwrap_or_else(|e| panic!("{e}"));
    let f64_run =
        Fixture::load("sam2_hiera/pipeline_f64.safetensors").unwrap_or_else(|e| panic!("{e}"));
    let reference_run = if precision == "f64" { &f64_run } else { &f };
    for (case, points, proposals) in CASES {
        let mask_input = dir.path().join(format!("{case} in.safetensors"));
        write_mask_input(&f, case, &mask_input);
        let out = dir.path().join(format!("out {case} {precision}"));
        let mut args = predict_args(&checkpoint, &config, &photo, &out);
        args.extend([OsStr::new("--mask-input"), mask_input.as_os_str()]);
        args.extend([OsStr::new("--precision"), OsStr::new(precision)]);
        if let Some(points) = points {
            args.extend([OsStr::new("--points"), OsStr::new(points)]);
        }
        let output = run(PREDICT, &args);
        let message = text(&output);
        assert!(output.status.success(), "{case}: {message}");
        assert_eq!(message.contains(" of 3: "), proposals == 3, "{message}");

        let written = read_safetensors(&out.join("photo ß_low_res.safetensors"))
            .unwrap_or_else(|e| panic!("{case}: {e}\n{message}"));
        let logits = written.get("low_res_mask").expect("low_res_mask");
        assert_eq!(logits.shape.to_vec(), [1, 1, 64, 64], "{case}");
        let file_dtype = if precision == "f64" {
            DType::F64
        } else {
            DType::F32
        };
        assert_eq!(logits.dtype, file_dtype, "{case}");
        let ours: Vec<f64> = logits
            .clone()
            .convert::<f64>()
            .to_vec()
            .expect("float logits");
        // The command keeps the proposal of the highest official IoU (the only one for 1).
        let prefix = if precision == "f64" {
            "f64_pixels."
        } else {
            ""
        };
        let iou = values(reference_run, &format!("{prefix}{case}.iou_pred"));
        assert_eq!(iou.len(), proposals, "{case}");
        let best = (0..iou.len())
            .reduce(|b, i| if iou[i] > iou[b] { i } else { b })
            .expect("a mask");
        let reference = values(reference_run, &format!("{prefix}{case}.low_res_masks"));
        let plane = ours.len();
        let reference = &reference[best * plane..(best + 1) * plane];
        let scale = max_abs(reference);
        assert!(scale < 32.0, "{case}: the ±32 clamp is a no-op here");
        if precision == "f64" {
            // NaN or infinity on either side is an infinite error.
            let error = rel_l2(&ours, reference);
            println!("{case} f64: low-res relative L2 {error:.3e} (bound {F64_REL_L2:.0e})");
            assert!(error <= F64_REL_L2, "{case}: relative L2 {error:.3e}");
            continue;
        }
        // NaN or infinity on our side is an infinite error.
        let error = max_abs_diff(&ours, reference);
        let per_unit = match precision {
            "f16" => 0.05,
            "bf16" => 0.25,
            _ => F32_TOL,
        };
        let bound = per_unit * scale.max(1.0);
        println!(
            "{case} {precision}: low-res max abs {error:.3e} of max |ref| {scale:.3} \
             (bound {bound:.3e})"
        );
        assert!(error <= bound, "{case}: {error:.3e} > {bound:.3e}");
    }
}

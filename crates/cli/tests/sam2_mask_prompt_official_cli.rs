//! `predict-sam2 --mask-input` against the official `SAM2ImagePredictor` (issue 39): the reduced
//! fixture model as an official-format checkpoint, the fixture's 240×320 PNG, and the mask
//! prompts of `tests/fixtures/sam2_hiera/pipeline.safetensors` (a mask alone, with two clicks,
//! with one click and three proposals). The `<stem>_low_res.safetensors` the command writes
//! must be the official low-res logits of the mask it keeps, in f32.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::official::{official_files, predict_args};
use common::{fixture, run, text};
use segburn_models::fixtures::{max_abs, max_abs_diff, Fixture};
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};

const PREDICT: &str = env!("CARGO_BIN_EXE_predict-sam2");

/// Per unit of max(1, max |official|), as the library's f32 test
/// (`crates/models/tests/sam2_mask_prompt_official.rs`): measured there ≤ 2.5e-6.
const F32_TOL: f64 = 1e-5;

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
    let dir = tempfile::Builder::new()
        .prefix("segburn mask ü ")
        .tempdir()
        .expect("temporary folder");
    let (checkpoint, config) = official_files(dir.path());
    let photo = dir.path().join("photo ß.png");
    std::fs::copy(fixture("sam2_hiera/image.png"), &photo).expect("copy the image");
    let f = Fixture::load("sam2_hiera/pipeline.safetensors").unwrap_or_else(|e| panic!("{e}"));
    for (case, points, proposals) in CASES {
        let mask_input = dir.path().join(format!("{case} in.safetensors"));
        write_mask_input(&f, case, &mask_input);
        let out = dir.path().join(format!("out {case}"));
        let mut args = predict_args(&checkpoint, &config, &photo, &out);
        args.extend([OsStr::new("--mask-input"), mask_input.as_os_str()]);
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
        let ours: Vec<f64> = logits
            .clone()
            .convert::<f64>()
            .to_vec()
            .expect("float logits");
        // The command keeps the proposal of the highest official IoU (the only one for 1).
        let iou = values(&f, &format!("{case}.iou_pred"));
        assert_eq!(iou.len(), proposals, "{case}");
        let best = (0..iou.len())
            .reduce(|b, i| if iou[i] > iou[b] { i } else { b })
            .expect("a mask");
        let reference = values(&f, &format!("{case}.low_res_masks"));
        let plane = ours.len();
        let reference = &reference[best * plane..(best + 1) * plane];
        let scale = max_abs(reference);
        assert!(scale < 32.0, "{case}: the ±32 clamp is a no-op here");
        // NaN or infinity on our side is an infinite error.
        let error = max_abs_diff(&ours, reference);
        let bound = F32_TOL * scale.max(1.0);
        println!("{case}: low-res max abs {error:.3e} of max |ref| {scale:.3} (bound {bound:.3e})");
        assert!(error <= bound, "{case}: {error:.3e} > {bound:.3e}");
    }
}

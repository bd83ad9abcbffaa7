//! Mask prompts against the official `SAM2ImagePredictor` (issue 39), on the reduced SAM 2.1
//! model and 240×320 image of `tests/fixtures/sam2_hiera/`: the predictor's `mask_input`
//! alone, with two clicks, and with one click and three proposals, in f32 and pure f64.
//!
//! The cases (`scripts/fixtures/sam2_hiera_cases/predictor.py`, `<case>.mask_input`):
//! * `mask`: the `point` case's best low-res mask fed back alone, one mask (as the official
//!   notebook refines a prediction);
//! * `mask_points`: the same mask with a positive and a negative click, one mask;
//! * `mask_formula_point`: a formula ellipse of logits with one click, three masks.
//!
//! Tolerances (`tests/fixtures/sam2_hiera/README.md`): f32 per unit of max(1, max |official|),
//! f64 relative L2 1e-10 against the official code run in f64.

mod sam2_hiera_support;

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::{DType, Tensor};
use sam2_hiera_support::{
    assert_close_scaled, fixture, image_bytes, input, load_model, predictor_on_the_reference_image,
    prompt_sets, reference_max_abs, rel_l2_error,
};
use segburn_models::fixtures::{tensor_values, Fixture};
use segburn_models::sam2::{ImagePrediction, Sam2ImagePredictor};

type B = Flex;

const SIZE: [usize; 2] = [240, 320];

/// (case, multimask_output)
const CASES: [(&str, bool); 3] = [
    ("mask", false),
    ("mask_points", false),
    ("mask_formula_point", true),
];

/// f32, per unit of max(1, max |official f32|). PyTorch's own f32-vs-f64 spread on these cases
/// is ≤ 1.3e-6 per unit on the low-res logits (3.6e-5 on values up to 30.5) and ≤ 7.2e-7 on
/// IoUs; segburn's f32 measured ≤ 2.5e-6 per unit (7.5e-5 on the logits of
/// `mask_formula_point`; the README); 1e-5 leaves 4× and is tighter than the point/box cases'
/// 2e-5.
const F32_TOL: f64 = 1e-5;
/// f64, relative L2 against the official f64 run (issue 39's acceptance).
const F64_REL_L2: f64 = 1e-10;

/// The predictor on the fixture image, with `mask_input` (in `dtype`) for `case`.
fn predict_case(
    predictor: &Sam2ImagePredictor<'_, B>,
    f: &Fixture,
    case: &str,
    multimask: bool,
    dtype: DType,
) -> ImagePrediction<B> {
    let mask: Tensor<B, 4> = input(f, &format!("{case}.mask_input"), &FlexDevice, dtype);
    assert_eq!(mask.dims(), [1, 1, 64, 64], "{case}.mask_input");
    let prediction = predictor
        .predict(&prompt_sets(f, case), Some(mask), multimask)
        .unwrap_or_else(|e| panic!("{case}: {e}"));
    assert_eq!(prediction.low_res_masks.dtype(), dtype, "{case}");
    prediction
}

fn shape_and_values<const D: usize>(t: Tensor<B, D>) -> (Vec<usize>, Vec<f64>) {
    (t.dims().to_vec(), tensor_values(t))
}

#[test]
fn mask_prompts_match_the_official_predictor_in_f32() {
    let device = FlexDevice;
    let f = fixture("pipeline.safetensors");
    let model = load_model::<B>(&device, DType::F32);
    // As a user: the RGB bytes through `set_image` (preprocessing, encoder, no_mem_embed).
    let predictor =
        Sam2ImagePredictor::set_image(&model, &image_bytes(&f), SIZE, &device).expect("encoder");
    for (case, multimask) in CASES {
        let prediction = predict_case(&predictor, &f, case, multimask, DType::F32);
        let key = |k: &str| format!("{case}.{k}");
        // Inside ±32 the predictor's clamp is a no-op, so its output is the raw reference.
        assert!(
            reference_max_abs(&f, &key("low_res_masks")) < 32.0,
            "{case}"
        );
        assert_close_scaled(prediction.low_res_masks, &f, &key("low_res_masks"), F32_TOL);
        assert_close_scaled(prediction.iou_pred, &f, &key("iou_pred"), F32_TOL);
        assert_close_scaled(
            prediction.object_score_logits,
            &f,
            &key("object_score_logits"),
            F32_TOL,
        );
    }
}

#[test]
fn mask_prompts_match_the_official_f64_run_within_1e_10() {
    let device = FlexDevice;
    let f = fixture("pipeline.safetensors");
    let reference = fixture("pipeline_f64.safetensors");
    let model = load_model::<B>(&device, DType::F64);
    let predictor = predictor_on_the_reference_image(&model, &device, DType::F64);
    for (case, multimask) in CASES {
        let prediction = predict_case(&predictor, &f, case, multimask, DType::F64);
        let outputs = [
            ("low_res_masks", shape_and_values(prediction.low_res_masks)),
            ("iou_pred", shape_and_values(prediction.iou_pred)),
            (
                "object_score_logits",
                shape_and_values(prediction.object_score_logits),
            ),
        ];
        for (name, (shape, ours)) in outputs {
            let key = format!("{case}.{name}");
            assert_eq!(shape, reference.data(&key).expect("key").shape.to_vec());
            // Infinite for any non-finite value (and asserted finite first).
            let error = rel_l2_error(&ours, &reference, &key);
            println!("{key}: f64 relative L2 {error:.3e} (bound {F64_REL_L2:.0e})");
            assert!(error <= F64_REL_L2, "{key}: relative L2 {error:.3e}");
        }
    }
}

//! Mask prompts in training (`prompts.prob_mask`): the ground-truth mask reaches the decoder
//! shrunk as SAM2Base shrinks a mask input, and a batch that starts from masks trains in F64,
//! Bf16 and F16 with the loss and gradients of F32 within each precision's rounding.

use crate::compute_threads::on_compute_pool;
use burn::backend::{Autodiff, Flex};
use burn::tensor::{DType, FloatDType};
use segburn_data::objects::{ObjectBatch, ObjectDataset};
use segburn_models::fixtures::gradients_by_key;
use segburn_models::sam2::Sam2;
use segburn_models::weights::{cast_floats, dotted_path};

use super::interactive::truth_mask_prompt;
use super::prompts::MaskView;
use super::tests::tiny_setup;
use super::*;
use crate::engine::{LossTerms, MicroBatch, TaskStep};
use crate::loss::sam::SamLoss;

type A = Autodiff<Flex>;

#[test]
fn a_truth_mask_prompt_is_the_mask_shrunk_with_its_area_kept() {
    let size = 64;
    let mut block = vec![0u8; size * size];
    for y in 20..32 {
        for x in 18..38 {
            block[y * size + x] = 1;
        }
    }
    let empty = vec![0u8; size * size];
    let truths = [
        MaskView {
            size,
            pixels: &block,
        },
        MaskView {
            size,
            pixels: &empty,
        },
    ];
    let prompt = truth_mask_prompt::<Flex>(&truths, [16, 16], &Default::default());
    assert_eq!(prompt.dims(), [2, 1, 16, 16]);
    let values: Vec<f32> = prompt.into_data().to_vec().expect("f32");
    let (object, blank) = values.split_at(256);
    assert!(blank.iter().all(|&v| v == 0.0), "an empty mask gives zeros");
    assert!(object.iter().all(|v| (0.0..=1.0).contains(v)));
    // A 4× shrink reads inputs 4i−2 .. 4i+6 for output i: outputs x 5..=8 of row 6 see only
    // the block (1), outputs whose inputs miss it see 0.
    for x in 5..=8 {
        assert!(
            (object[6 * 16 + x] - 1.0).abs() < 1e-6,
            "{}",
            object[6 * 16 + x]
        );
    }
    assert_eq!(object[6 * 16 + 2], 0.0);
    assert_eq!(object[12 * 16 + 6], 0.0);
    // The triangle filter of the shrink is a partition of unity: away from the borders the
    // prompt keeps the mask's area, in 4×4 cells (240 pixels = 15 cells).
    let cells: f64 = object.iter().map(|&v| f64::from(v)).sum();
    assert!((cells - 15.0).abs() < 1e-4, "{cells}");
}

/// The first validation image of the sample with objects.
fn batch_with_objects(setup: &Sam2Setup) -> ObjectBatch {
    let data = &setup.data;
    let dataset = ObjectDataset::new(data, &data.val_split, setup.model.image_size, 0)
        .expect("validation objects");
    (0..dataset.len())
        .map(|index| dataset.eval_batch(index).expect("batch"))
        .find(|batch| batch.num_objects() > 0)
        .expect("an image with objects")
}

/// The loss and the chosen parameters' gradients of one micro-batch in `dtype` (the model's
/// weights cast to F64 for F64; half precisions compute on the f32 weights, as the trainer).
fn loss_and_gradients(
    model: &Sam2<A>,
    step: &Sam2Step,
    batch: &ObjectBatch,
    dtype: FloatDType,
    keys: &[String],
) -> (f64, std::collections::BTreeMap<String, Vec<f64>>) {
    let model = match dtype {
        FloatDType::F64 => cast_floats(model.clone(), DType::F64),
        _ => model.clone(),
    };
    let at = MicroBatch {
        seed: 5,
        step: 0,
        index: 0,
        dtype,
    };
    let out = step
        .loss(&model, batch.clone(), &at, &Default::default())
        .expect("loss");
    let loss = out.terms.total();
    let objective = out.objective.expect("objects");
    let grads = on_compute_pool(|| objective.backward());
    (
        loss,
        gradients_by_key::<A, _>(&model, &grads, keys, dotted_path),
    )
}

#[test]
fn a_batch_started_from_masks_trains_in_every_precision_close_to_f32() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut setup = tiny_setup(dir.path(), 1);
    setup.prompts.prob_mask = 1.0;
    // The mask-alone step only: a correction click depends on thresholded logits, which
    // rounding may flip between precisions (a different prompt, not a precision error);
    // likewise the object-score gate.
    setup.prompts.correction_steps = 0;
    setup.model.gate_masks_by_object_score = false;
    let trainer = Sam2Trainer::<A>::new(setup.clone(), Default::default()).expect("trainer");
    let step = Sam2Step {
        loss: SamLoss::new(setup.loss.clone()),
        loss_config: setup.loss.clone(),
        prompts: setup.prompts.clone(),
        freeze_image_encoder: false,
        drop_path_rate: 0.0,
        gate_masks_by_object_score: false,
    };
    let batch = batch_with_objects(&setup);
    // The mask embedding (read only from a mask prompt), the decoder's output path and the
    // image path.
    let keys: Vec<String> = [
        "sam_prompt_encoder.mask_downscaling.0.weight",
        "sam_prompt_encoder.mask_downscaling.6.weight",
        "sam_mask_decoder.output_upscaling.0.weight",
        "sam_mask_decoder.iou_prediction_head.layers.0.weight",
    ]
    .map(String::from)
    .to_vec();
    let run = |dtype| loss_and_gradients(trainer.model(), &step, &batch, dtype, &keys);
    let (loss32, grads32) = run(FloatDType::F32);
    assert_eq!(grads32.len(), keys.len(), "{:?}", grads32.keys());
    let mask_grad = &grads32["sam_prompt_encoder.mask_downscaling.0.weight"];
    assert!(
        mask_grad.iter().any(|g| *g != 0.0),
        "the mask prompt does not reach the loss"
    );
    // Bounds (measured 2026-12-07 on Flex; loss relative error, gradient relative L2):
    // - F64 against F32 is f32's rounding: loss equal to the last f32 bit, gradients 2.2e-7
    //   to 3.8e-7; bounds 1e-5 / 1e-5.
    // - F16 (11-bit mantissa): loss 2.2e-5, gradients 6.9e-4 to 1.3e-3 (≤ 4.6e-3 over every
    //   parameter); bounds 1e-2 (the trainer-level test's) / 1e-2.
    // - BF16 (8-bit mantissa): loss 1.2e-5; gradients 9.5e-3 at the output upscaling and
    //   6.0e-2 to 1.5e-1 on the mask embedding and the IoU head (median 0.11, up to 0.3 over
    //   every parameter). 8× F16's error is what the mantissa explains; the rest grows
    //   backwards through the two-way transformer and is not explained yet (issue 39's note).
    //   Bound 0.4: still fails a gradient that is zero (1.0), random (≈ 1.4) or NaN.
    let mut failures = Vec::new();
    for (dtype, loss_bound, grad_bound) in [
        (FloatDType::F64, 1e-5, 1e-5),
        (FloatDType::BF16, 1e-2, 0.4),
        (FloatDType::F16, 1e-2, 1e-2),
    ] {
        let (loss, grads) = run(dtype);
        let loss_error = (loss - loss32).abs() / loss32.abs();
        println!("{dtype:?}: loss {loss} vs f32 {loss32} (relative {loss_error:.2e})");
        assert!(
            loss_error <= loss_bound,
            "{dtype:?}: loss {loss} vs {loss32}"
        );
        // The f32 loss may not see f64's last bits; the gradients do.
        assert!(
            loss != loss32 || keys.iter().any(|key| grads[key] != grads32[key]),
            "{dtype:?} computed exactly the f32 results"
        );
        for key in &keys {
            let error = segburn_kernels::accuracy::rel_l2(&grads[key], &grads32[key]);
            println!("{dtype:?}: {key} gradient rel-L2 {error:.2e}");
            if error > grad_bound {
                failures.push(format!("{dtype:?}: {key} rel-L2 {error:.2e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

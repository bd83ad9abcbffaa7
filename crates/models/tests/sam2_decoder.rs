//! Parity of the mask decoder with the official PyTorch module (fixtures `sam2/`): the
//! transformer and upscaling intermediates, then the multimask and single-mask outputs.

mod sam2_support;

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::Tensor;
use sam2_support::{
    fixture, inputs, load_mask_decoder, load_prompt_encoder, max_abs_value, max_abs_vs, Inputs,
};
use segburn_models::sam2::{
    MaskDecoder, MaskDecoderConfig, MaskDecoderInput, PromptEncoder, Sam2Error,
};

type B = Flex;

/// The fixture's decoder input: points then box, no mask prompt.
fn decoder_input(encoder: &PromptEncoder<B>, input: &Inputs<B>) -> MaskDecoderInput<B> {
    let prompts = encoder
        .forward(Some(&input.points), Some(input.boxes.clone()), None)
        .expect("prompts");
    MaskDecoderInput {
        image_embeddings: input.image_embeddings.clone(),
        image_pe: encoder.get_dense_pe(),
        sparse_prompt_embeddings: prompts.sparse,
        dense_prompt_embeddings: prompts.dense,
        high_res_features: Some(input.high_res.clone()),
    }
}

fn setup() -> (PromptEncoder<B>, MaskDecoder<B>, Inputs<B>) {
    let device = FlexDevice;
    (
        load_prompt_encoder("prompt_encoder.safetensors", &device),
        load_mask_decoder("mask_decoder.safetensors", &device),
        inputs(&device),
    )
}

#[test]
fn intermediates_match_the_official_decoder() {
    let (encoder, decoder, input) = setup();
    let predictions = decoder
        .predict_masks(decoder_input(&encoder, &input))
        .expect("decoder");
    let reference = fixture("decoder_intermediates.safetensors");
    let mut report = Vec::new();
    let mut check = |name: &str, error: f64, tolerance: f64| {
        let scale = max_abs_value(&reference, name);
        report.push(format!("{name} {error:.2e} (max |ref| {scale:.2})"));
        assert!(
            error <= tolerance,
            "{name}: max abs error {error:e} > {tolerance:e}"
        );
    };
    check("hs", max_abs_vs(predictions.hs, &reference, "hs"), 1e-4);
    check(
        "keys",
        max_abs_vs(predictions.keys, &reference, "keys"),
        1e-4,
    );
    check(
        "upscaled",
        max_abs_vs(predictions.upscaled, &reference, "upscaled"),
        1e-4,
    );
    check(
        "all_masks",
        max_abs_vs(predictions.masks, &reference, "all_masks"),
        1e-4,
    );
    check(
        "all_iou",
        max_abs_vs(predictions.iou_pred, &reference, "all_iou"),
        1e-5,
    );
    check(
        "all_mask_tokens",
        max_abs_vs(predictions.mask_tokens_out, &reference, "all_mask_tokens"),
        1e-4,
    );
    check(
        "obj_logits",
        max_abs_vs(predictions.object_score_logits, &reference, "obj_logits"),
        1e-5,
    );
    println!("max abs: {}", report.join(", "));
}

fn check_outputs(multimask: bool, file: &str) {
    let (encoder, decoder, input) = setup();
    let output = decoder
        .forward(decoder_input(&encoder, &input), multimask)
        .expect("decoder");
    let reference = fixture(file);
    let masks = max_abs_vs(output.masks, &reference, "low_res_masks");
    let iou = max_abs_vs(output.iou_pred, &reference, "iou_pred");
    let tokens = max_abs_vs(output.sam_tokens_out, &reference, "sam_tokens_out");
    let object = max_abs_vs(
        output.object_score_logits,
        &reference,
        "object_score_logits",
    );
    println!(
        "{file}: max abs masks {masks:.2e} (max |ref| {:.1}), iou {iou:.2e}, tokens {tokens:.2e}, object {object:.2e}",
        max_abs_value(&reference, "low_res_masks")
    );
    assert!(masks <= 1e-4, "masks: {masks:e}");
    assert!(iou <= 1e-5, "iou: {iou:e}");
    assert!(tokens <= 1e-4, "tokens: {tokens:e}");
    assert!(object <= 1e-5, "object score: {object:e}");
}

#[test]
fn multimask_outputs_match() {
    check_outputs(true, "outputs_multimask.safetensors");
}

#[test]
fn single_mask_outputs_match() {
    check_outputs(false, "outputs_singlemask.safetensors");
}

#[test]
fn prompt_sets_share_one_image() {
    // Upstream's batched prediction: image features keep batch 1 and are repeated per prompt
    // set. Two identical prompt sets must both give the batch-1 answer.
    let (encoder, decoder, input) = setup();
    let single = decoder_input(&encoder, &input);
    let mut batched = single.clone();
    batched.sparse_prompt_embeddings =
        Tensor::cat(vec![single.sparse_prompt_embeddings.clone(); 2], 0);
    batched.dense_prompt_embeddings =
        Tensor::cat(vec![single.dense_prompt_embeddings.clone(); 2], 0);
    let one = decoder.forward(single, true).expect("batch 1");
    let two = decoder.forward(batched, true).expect("batch 2");
    assert_eq!(two.masks.dims(), [2, 3, 64, 64]);
    for row in 0..2 {
        let diff = (two.masks.clone().narrow(0, row, 1) - one.masks.clone())
            .abs()
            .max()
            .into_scalar();
        println!("batch-2 row {row} vs batch 1: max abs {diff:.2e}");
        assert!(diff < 1e-5, "row {row}: {diff}");
    }
}

#[test]
fn stability_fallback_applies_only_at_inference() {
    let device = FlexDevice;
    let (encoder, _, input) = setup();
    let config = MaskDecoderConfig::new()
        .with_dynamic_multimask_via_stability(true)
        // A threshold above 1 can never be met: the fallback must pick the best multimask.
        .with_dynamic_multimask_stability_thresh(1.5);
    let (decoder, _) = segburn_models::sam2::import::load_mask_decoder(
        config.init::<B>(&device),
        &sam2_support::fixture_path("mask_decoder.safetensors"),
        true,
    )
    .expect("load");
    let all = decoder
        .predict_masks(decoder_input(&encoder, &input))
        .expect("predict");
    let iou: Vec<f32> = all.iou_pred.clone().into_data().to_vec().expect("iou");
    let best = 1
        + (1..4)
            .map(|i| i - 1)
            .max_by(|&a, &b| iou[a + 1].total_cmp(&iou[b + 1]))
            .unwrap_or(0);

    let inference = decoder
        .forward_inference(decoder_input(&encoder, &input), false)
        .expect("inference");
    let expected = all.masks.clone().narrow(1, best, 1);
    let diff = (inference.masks - expected).abs().max().into_scalar();
    assert!(
        diff == 0.0,
        "fallback mask differs from multimask {best}: {diff}"
    );
    let picked: f32 = inference.iou_pred.into_scalar();
    assert_eq!(picked, iou[best]);

    let training = decoder
        .forward(decoder_input(&encoder, &input), false)
        .expect("training");
    let diff = (training.masks - all.masks.narrow(1, 0, 1))
        .abs()
        .max()
        .into_scalar();
    assert!(diff == 0.0, "training must return mask 0");
}

#[test]
fn wrong_feature_shapes_are_errors() {
    let (encoder, decoder, input) = setup();
    let mut bad = decoder_input(&encoder, &input);
    bad.high_res_features = None;
    let error = decoder.forward(bad, true).unwrap_err();
    assert!(matches!(error, Sam2Error::Shape(_)), "{error}");

    let mut bad = decoder_input(&encoder, &input);
    let device = FlexDevice;
    bad.image_embeddings = Tensor::zeros([1, 128, 16, 16], &device);
    let error = decoder.forward(bad, true).unwrap_err();
    assert!(error.to_string().contains("image embeddings"), "{error}");

    let mut bad = decoder_input(&encoder, &input);
    if let Some(features) = bad.high_res_features.as_mut() {
        features.feat_s0 = Tensor::zeros([1, 32, 32, 32], &device);
    }
    let error = decoder.forward(bad, true).unwrap_err();
    assert!(error.to_string().contains("feat_s0"), "{error}");
}

/// With bf16 image features the decoder computes in bf16 (weights cast from the f32 masters,
/// layer norms in f32) and stays close to the official f32 outputs.
#[test]
fn bf16_features_run_the_decoder_in_bf16_close_to_the_official_outputs() {
    use burn::tensor::{DType, FloatDType};
    use segburn_models::fixtures::rel_l2;
    let (encoder, decoder, mut input) = setup();
    input.image_embeddings = input.image_embeddings.cast(FloatDType::BF16);
    input.high_res = input.high_res.cast(FloatDType::BF16);
    let output = decoder
        .forward(decoder_input(&encoder, &input), true)
        .expect("decoder");
    assert_eq!(output.masks.dtype(), DType::BF16);
    let reference = fixture("outputs_multimask.safetensors");
    let values = |t: Tensor<B, 4>| -> Vec<f64> {
        t.cast(FloatDType::F32).into_data().iter::<f64>().collect()
    };
    let ours = values(output.masks);
    let official = reference.values_f64("low_res_masks").expect("masks");
    let error = rel_l2(&ours, &official);
    let same_sign = ours
        .iter()
        .zip(&official)
        .filter(|(a, b)| (**a > 0.0) == (**b > 0.0))
        .count() as f64
        / ours.len() as f64;
    let iou = max_abs_vs(
        output.iou_pred.cast(FloatDType::F32),
        &reference,
        "iou_pred",
    );
    println!(
        "bf16 decoder vs official f32: masks relative L2 {error:.2e}, same sign {same_sign:.5}, iou max abs {iou:.2e}"
    );
    assert!(error < 0.03, "masks relative L2 {error}");
    assert!(
        same_sign > 0.99,
        "mask pixels with the official sign: {same_sign}"
    );
    assert!(iou < 0.05, "iou max abs {iou}");
}

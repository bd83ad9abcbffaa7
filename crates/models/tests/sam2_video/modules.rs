//! SAM 2.1's video-memory modules against the official code (`tests/fixtures/sam2_video/`,
//! reduced model of `sam2_hiera/`): the memory encoder, `_encode_new_memory` (binarized and
//! sigmoid masks, an absent object), the official 4-stage mask downsampler and the memory
//! attention with and without object-pointer tokens, each in f32 and f64.
//!
//! Tolerance in f32: `SPREAD_FACTOR` times PyTorch's own f32-vs-f64 max error on the same
//! output (`manifest.json`, 1.8e-6 to 9.6e-6 on values up to |13|), with a floor of 1e-6 of the
//! largest value. In f64: 1e-12 of the largest value (measured: 5e-16 to 2e-15) (both sides compute in f64; the official
//! f64 runs keep f32 tables only where the official code itself does, the sine encodings).

use crate::sam2_hiera_support::{errors, input};
use crate::sam2_video_support::{fixture, official_spread, q8_input, sequence_to_map, video_model};
use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::{DType, Tensor};
use segburn_models::fixtures::{fixture_path, sam2_video_config};
use segburn_models::sam2::video::{MaskDownSamplerConfig, MemoryBank};
use segburn_models::tensor_file::read_safetensors;
use segburn_models::weights::{cast_floats, dotted_path, load_named, LoadOptions};

type B = Flex;

/// Our f32 error may be this many times PyTorch's own f32 error (both against f64).
const SPREAD_FACTOR: f64 = 8.0;
/// f64 against f64, relative to the largest value.
const F64_RELATIVE: f64 = 1e-12;

/// Compares `ours` with `key` of the f32 (`dtype` F32) or f64 file, with the tolerance of
/// that precision; `spread` names the output in `manifest.json` (`part`, `output`).
fn check<const D: usize>(
    ours: Tensor<B, D>,
    file: &str,
    key: &str,
    dtype: DType,
    spread: (&str, &str),
) {
    let f64_file = file.replace(".safetensors", "_f64.safetensors");
    let f = fixture(if dtype == DType::F64 { &f64_file } else { file });
    let (official, max_value) = official_spread(spread.0, spread.1);
    let tolerance = if dtype == DType::F64 {
        F64_RELATIVE * max_value
    } else {
        (SPREAD_FACTOR * official).max(1e-6 * max_value)
    };
    let (error, relative) = errors(ours, &f, key);
    println!(
        "{key} ({dtype:?}): max error {error:.3e} ({relative:.2e} relative), PyTorch f32-vs-f64 \
         {official:.3e}, tolerance {tolerance:.3e}"
    );
    assert!(
        error <= tolerance,
        "{key} ({dtype:?}): {error:.3e} > {tolerance:.3e}"
    );
}

#[test]
fn the_memory_encoder_matches_the_official_one_in_f32_and_f64() {
    let device = FlexDevice;
    let f = fixture("memory_encoder.safetensors");
    let config = sam2_video_config().video.expect("video config");
    for dtype in [DType::F32, DType::F64] {
        let model = video_model::<B>("sam2_hiera/model.safetensors", &device, dtype);
        let encoder = model.memory_encoder.as_ref().expect("memory encoder");
        let file = "memory_encoder.safetensors";
        let pix = input::<B, 4>(&f, "encoder.pix_feat", &device, dtype);
        let masks = q8_input::<B>(&f, "encoder.masks_q8", &device, dtype);
        let memory = encoder.forward(pix, masks);
        check(
            memory.features,
            file,
            "encoder.features",
            dtype,
            ("memory_encoder", "encoder.features"),
        );
        // The sine table is an f32 table in both official runs.
        check(
            memory.pos_enc.clone(),
            "memory_encoder.safetensors",
            "encoder.pos_enc",
            DType::F32,
            ("memory_encoder", "encoder.pos_enc"),
        );

        let feats = input::<B, 3>(&f, "encode_new_memory.vision_feats", &device, dtype);
        let pix = sequence_to_map(feats, [16, 16]);
        let logits = q8_input::<B>(
            &f,
            "encode_new_memory.pred_masks_high_res_q8",
            &device,
            dtype,
        );
        let scores = input::<B, 2>(&f, "encode_new_memory.object_score_logits", &device, dtype);
        for (from_clicks, case) in [
            (true, "encode_new_memory"),
            (false, "encode_new_memory_sigmoid"),
        ] {
            let memory = model
                .encode_memory(
                    pix.clone(),
                    logits.clone(),
                    scores.clone(),
                    from_clicks,
                    &config,
                )
                .expect("encode_memory");
            let key = format!("{case}.features");
            check(memory.features, file, &key, dtype, ("memory_encoder", &key));
        }
    }
}

#[test]
fn the_official_mask_downsampler_matches_in_f32_and_f64() {
    let device = FlexDevice;
    let f = fixture("mask_downsampler_official.safetensors");
    let path = fixture_path("sam2_video/mask_downsampler_weights.safetensors").expect("weights");
    let tensors = read_safetensors(&path).expect("weights");
    // The yaml's settings: 3×3 convolutions, stride 2, padding 1, 4 stages to stride 16.
    let config = MaskDownSamplerConfig::new(64);
    let options = LoadOptions::strict(path.display().to_string());
    let (downsampler, report) =
        load_named(config.init::<B>(&device), &tensors, &dotted_path, &options)
            .expect("strict load");
    assert_eq!(report.loaded.len(), 18, "{report}");
    for dtype in [DType::F32, DType::F64] {
        let downsampler = cast_floats(downsampler.clone(), dtype);
        let masks = q8_input::<B>(&f, "input_q8", &device, dtype);
        let out = downsampler.forward(masks);
        check(
            out,
            "mask_downsampler_official.safetensors",
            "output",
            dtype,
            ("mask_downsampler_official", "output"),
        );
    }
}

#[test]
fn memory_attention_matches_with_and_without_object_pointer_tokens() {
    let device = FlexDevice;
    let f = fixture("memory_attention.safetensors");
    for dtype in [DType::F32, DType::F64] {
        let model = video_model::<B>("sam2_hiera/model.safetensors", &device, dtype);
        let attention = model.memory_attention.as_ref().expect("memory attention");
        let batch_first = |key: &str| input::<B, 3>(&f, key, &device, dtype).swap_dims(0, 1);
        let (curr, curr_pos) = (batch_first("curr"), batch_first("curr_pos"));
        for case in ["plain", "ptrs"] {
            let count = |key: &str| f.values_f64(&format!("{case}.{key}")).expect(key)[0] as usize;
            let tokens = count("memory_tokens");
            let bank = MemoryBank {
                memory: batch_first("memory").narrow(1, 0, tokens),
                memory_pos: batch_first("memory_pos").narrow(1, 0, tokens),
                num_obj_ptr_tokens: count("num_obj_ptr_tokens"),
            };
            let out = attention
                .forward(curr.clone(), curr_pos.clone(), [16, 16], &bank)
                .expect("memory attention");
            // Back to the official sequence-first layout.
            let out = out.swap_dims(0, 1);
            let key = format!("{case}.output");
            check(
                out,
                "memory_attention.safetensors",
                &key,
                dtype,
                ("memory_attention", &key),
            );
        }
    }
}

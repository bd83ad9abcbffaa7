//! The predictor's rules that need no reference numbers: memory-frame selection, the order of
//! frame maps, and the errors a caller can cause (each names what is wrong).

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::Tensor;

use super::objects::FrameMap;
use super::{select_closest_cond_frames, ObjectPrompt, Sam2VideoPredictor, VideoPredictorConfig};
use crate::fixtures::sam2_video_config;
use crate::sam2::{Sam2, Sam2Config};

type B = Flex;

#[test]
fn all_prompted_frames_are_selected_without_a_limit_and_the_closest_with_one() {
    let frames = [0, 9, 4, 12];
    assert_eq!(
        select_closest_cond_frames(5, &frames, None),
        (frames.to_vec(), vec![])
    );
    assert_eq!(
        select_closest_cond_frames(5, &frames, Some(4)),
        (frames.to_vec(), vec![])
    );
    // Before: 4, at or after: 9, then by distance: 0 (5 away) before 12 (7 away).
    assert_eq!(
        select_closest_cond_frames(5, &frames, Some(3)),
        (vec![4, 9, 0], vec![12])
    );
    assert_eq!(
        select_closest_cond_frames(5, &frames, Some(2)),
        (vec![4, 9], vec![0, 12])
    );
    // Nothing after frame 20: the closest before, then the next closest.
    assert_eq!(
        select_closest_cond_frames(20, &frames, Some(2)),
        (vec![12, 9], vec![0, 4])
    );
}

#[test]
fn a_frame_map_keeps_insertion_order_and_replaces_in_place() {
    let mut map = FrameMap::default();
    map.insert(5, "a");
    map.insert(2, "b");
    map.insert(5, "c");
    assert_eq!(map.iter().collect::<Vec<_>>(), [(5, &"c"), (2, &"b")]);
    assert_eq!(map.remove(5), Some("c"));
    assert_eq!(map.frames().collect::<Vec<_>>(), [2]);
}

fn model_and_config() -> (Sam2<B>, Sam2Config) {
    let config = sam2_video_config();
    (config.init::<B>(&FlexDevice), config)
}

fn frames(count: usize, side: usize) -> Vec<Tensor<B, 4>> {
    (0..count)
        .map(|_| Tensor::zeros([1, 3, side, side], &FlexDevice))
        .collect()
}

/// A predictor on three blank 256² frames of a 240×320 video.
fn three_frame_predictor<'m>(model: &'m Sam2<B>, config: &Sam2Config) -> Sam2VideoPredictor<'m, B> {
    Sam2VideoPredictor::new(
        model,
        config,
        VideoPredictorConfig::new(),
        frames(3, 256),
        [240, 320],
    )
    .expect("predictor")
}

fn error_of<T>(result: Result<T, crate::sam2::Sam2Error>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_videos_are_refused_with_the_reason() {
    let (model, config) = model_and_config();
    let settings = || VideoPredictorConfig::new();
    let message = error_of(Sam2VideoPredictor::new(
        &model,
        &config,
        settings(),
        frames(0, 256),
        [240, 320],
    ));
    assert!(message.contains("no frames"), "{message}");
    let message = error_of(Sam2VideoPredictor::new(
        &model,
        &config,
        settings(),
        frames(2, 128),
        [240, 320],
    ));
    assert!(message.contains("frame 0 is [1, 3, 128, 128]"), "{message}");
    let image_only = crate::fixtures::sam2_hiera_config();
    let message = error_of(Sam2VideoPredictor::new(
        &model,
        &image_only,
        settings(),
        frames(2, 256),
        [240, 320],
    ));
    assert!(message.contains("video"), "{message}");
}

#[test]
fn bad_prompts_are_refused_and_change_nothing() {
    let (model, config) = model_and_config();
    let mut predictor = three_frame_predictor(&model, &config);
    let message = error_of(predictor.propagate(None, None, false));
    assert!(message.contains("no object has a prompt"), "{message}");
    let cases = [
        (
            5,
            ObjectPrompt::clicks(vec![[1.0, 2.0]], vec![1]),
            "frame 5 does not exist",
        ),
        (
            0,
            ObjectPrompt::clicks(vec![[1.0, 2.0]], vec![7]),
            "click label 7",
        ),
        (
            0,
            ObjectPrompt::clicks(vec![[1.0, 2.0]], vec![]),
            "1 clicks but 0 labels",
        ),
        (
            0,
            ObjectPrompt::clicks(vec![[f32::NAN, 2.0]], vec![1]),
            "not a finite number",
        ),
        (
            0,
            ObjectPrompt::clicks(vec![], vec![]),
            "needs clicks or a box",
        ),
        (
            0,
            ObjectPrompt::Clicks {
                points: vec![],
                labels: vec![],
                bounding_box: Some([0.0, 0.0, 5.0, 5.0]),
                clear_old_clicks: false,
            },
            "a box must come before any click",
        ),
        (
            0,
            ObjectPrompt::Mask {
                mask: vec![true; 10],
                size: [4, 4],
            },
            "a 4×4 mask needs 16 values, got 10",
        ),
    ];
    for (frame, prompt, expected) in cases {
        let message = error_of(predictor.add_prompt(frame, 1, prompt));
        assert!(message.contains(expected), "{message}");
    }
    assert!(
        predictor.object_ids().is_empty(),
        "a refused prompt adds no object"
    );
}

#[test]
fn a_mask_prompt_of_any_size_gives_a_prompted_frame_and_tracking_runs() {
    let (model, config) = model_and_config();
    let mut predictor = three_frame_predictor(&model, &config);
    let (h, w) = (60, 80);
    let mask: Vec<bool> = (0..h * w).map(|i| (i / w) > 20 && (i % w) > 30).collect();
    let masks = predictor
        .add_prompt(1, 7, ObjectPrompt::Mask { mask, size: [h, w] })
        .expect("mask prompt");
    assert_eq!(masks.object_ids, [7]);
    assert_eq!(masks.logits.dims(), [1, 1, 240, 320]);
    let frames = predictor.propagate(None, None, false).expect("forward");
    assert_eq!(frames.iter().map(|m| m.frame).collect::<Vec<_>>(), [1, 2]);
    let frames = predictor.propagate(Some(1), None, true).expect("backward");
    assert_eq!(frames.iter().map(|m| m.frame).collect::<Vec<_>>(), [1, 0]);
    let object = predictor.object(7).expect("object 7");
    assert!(object.outputs.cond.contains(1));
    assert!(object.outputs.non_cond.contains(0) && object.outputs.non_cond.contains(2));
}

#[test]
fn the_host_bf16_rounding_is_burns() {
    // The host path of `stored` (devices without bf16) must round as Burn's cast does.
    let values: Vec<f32> = (0..4096)
        .map(|i| ((i as f32) * 0.7311).sin() * 37.5 + 1e-3 * i as f32)
        .collect();
    let t = Tensor::<B, 1>::from_data(
        burn::tensor::TensorData::new(values.clone(), [4096]),
        &FlexDevice,
    );
    let by_burn: Vec<f32> = t
        .cast(burn::tensor::DType::BF16)
        .cast(burn::tensor::DType::F32)
        .into_data()
        .to_vec()
        .expect("f32");
    let by_host: Vec<f32> = values
        .iter()
        .map(|&v| half::bf16::from_f32(v).to_f32())
        .collect();
    assert_eq!(by_burn, by_host);
}

#[test]
fn without_overlap_only_the_highest_object_stays_positive() {
    let values = vec![3.0f32, -1.0, 0.5, 2.0, 1.0, -4.0, 5.0, -20.0];
    let logits = Tensor::<B, 4>::from_data(
        burn::tensor::TensorData::new(values, [2, 1, 2, 2]),
        &FlexDevice,
    );
    let out: Vec<f32> = super::non_overlapping(logits)
        .into_data()
        .to_vec()
        .expect("f32");
    // Object 0 has [3, -1, 0.5, 2], object 1 [1, -4, 5, -20]: object 0 is highest at pixels
    // 0, 1 and 3, object 1 at pixel 2; the others are clamped to at most -10 there.
    assert_eq!(out, [3.0, -1.0, -10.0, 2.0, -10.0, -10.0, 5.0, -20.0]);
}

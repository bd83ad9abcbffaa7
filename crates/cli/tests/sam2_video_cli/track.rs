//! `track-sam2` on the official video predictor's fixture clip (its 7 frames as the official
//! loader decoded them, 256² PNGs, so the model reads exactly the official input) with the
//! reduced video model written as an official checkpoint into a folder whose name has spaces
//! and non-ASCII characters: clicks on one object, a box on another, forward then backward.
//! Every frame's palette PNG must be the library predictor's masks on the same input; the
//! library matches the official predictor (`crates/models/tests/sam2_video/predictor.rs`).
//! Bad prompts and frames are refused naming what is wrong.

use std::path::{Path, PathBuf};

use crate::common::official::official_video_files as official_files;
use crate::common::{assert_fails_naming_once, run, text};
use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::{Tensor, TensorData};
use segburn_models::fixtures::{sam2_video_config, Fixture};
use segburn_models::sam2::import::read_checkpoint;
use segburn_models::sam2::official_model::video_model_from_checkpoint;
use segburn_models::sam2::video_predictor::{
    ObjectPrompt, Sam2VideoPredictor, VideoPredictorConfig,
};

const TRACK: &str = env!("CARGO_BIN_EXE_track-sam2");
const SIDE: usize = 256;

fn workspace_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("segburn track ü 视频 ")
        .tempdir()
        .expect("temporary folder")
}

/// The fixture's decoded frames, `[7][256·256·3]`.
fn clip() -> Vec<Vec<u8>> {
    let f =
        Fixture::load("sam2_video/video_predictor.safetensors").unwrap_or_else(|e| panic!("{e}"));
    let data = f.data("images_u8").expect("images_u8");
    data.as_bytes()
        .chunks(SIDE * SIDE * 3)
        .map(<[u8]>::to_vec)
        .collect()
}

fn write_frames(dir: &Path, frames: &[Vec<u8>]) -> PathBuf {
    let folder = dir.join("frames ß");
    std::fs::create_dir_all(&folder).expect("frames folder");
    for (t, rgb) in frames.iter().enumerate() {
        let path = folder.join(format!("{t:05}.png"));
        image::save_buffer(
            &path,
            rgb,
            SIDE as u32,
            SIDE as u32,
            image::ExtendedColorType::Rgb8,
        )
        .expect("frame");
    }
    folder
}

/// The library predictor on the same frames and prompts: object ids per pixel per frame.
fn library_ids(checkpoint: &Path, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let device = FlexDevice;
    let tensors = read_checkpoint(checkpoint).expect("checkpoint");
    let config = sam2_video_config();
    let model =
        video_model_from_checkpoint::<Flex>(&tensors, Some(config.clone()), "fixture", &device)
            .expect("model")
            .model;
    let (mean, std) = ([0.485f32, 0.456, 0.406], [0.229f32, 0.224, 0.225]);
    let tensors: Vec<Tensor<Flex, 4>> = frames
        .iter()
        .map(|rgb| {
            let mut planes = vec![0f32; 3 * SIDE * SIDE];
            for (p, px) in rgb.chunks_exact(3).enumerate() {
                for c in 0..3 {
                    planes[c * SIDE * SIDE + p] =
                        ((f64::from(px[c]) / 255.0) as f32 - mean[c]) / std[c];
                }
            }
            Tensor::from_data(TensorData::new(planes, [1, 3, SIDE, SIDE]), &device)
        })
        .collect();
    let mut predictor = Sam2VideoPredictor::new(
        &model,
        &config,
        VideoPredictorConfig::new(),
        tensors,
        [SIDE, SIDE],
    )
    .expect("predictor");
    predictor
        .add_prompt(
            2,
            1,
            ObjectPrompt::clicks(vec![[80.0, 117.0], [32.0, 213.0]], vec![1, 0]),
        )
        .expect("clicks");
    predictor
        .add_prompt(
            2,
            2,
            ObjectPrompt::bounding_box([144.0, 120.0, 216.0, 200.0]),
        )
        .expect("box");
    let mut ids = vec![Vec::new(); frames.len()];
    for reverse in [false, true] {
        for masks in predictor.propagate(None, None, reverse).expect("propagate") {
            let values: Vec<f32> = masks.logits.into_data().iter::<f32>().collect();
            let plane = SIDE * SIDE;
            ids[masks.frame] = (0..plane)
                .map(|p| {
                    let (a, b) = (values[p], values[plane + p]);
                    if a <= 0.0 && b <= 0.0 {
                        0
                    } else if a >= b {
                        1
                    } else {
                        2
                    }
                })
                .collect();
        }
    }
    ids
}

fn read_palette_ids(path: &Path) -> Vec<u8> {
    let annotation = segburn_data::vos::read_annotation(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!([annotation.height, annotation.width], [SIDE, SIDE]);
    annotation.ids
}

#[test]
fn tracked_masks_equal_the_library_predictor_on_every_frame() {
    let dir = workspace_dir();
    let (checkpoint, config) = official_files(dir.path());
    let frames = clip();
    let folder = write_frames(dir.path(), &frames);
    let out = dir.path().join("out ñ");
    let output = run(
        TRACK,
        &[
            "--checkpoint".as_ref(),
            checkpoint.as_os_str(),
            "--model-config".as_ref(),
            config.as_os_str(),
            "--frames".as_ref(),
            folder.as_os_str(),
            "--prompt".as_ref(),
            "2:1:points=80,117,1;32,213,0".as_ref(),
            "--prompt".as_ref(),
            "2:2:box=144,120,216,200".as_ref(),
            "--direction".as_ref(),
            "both".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let expected = library_ids(&checkpoint, &frames);
    for (t, expected) in expected.iter().enumerate() {
        let ours = read_palette_ids(&out.join("masks").join(format!("{t:05}.png")));
        let differing = ours.iter().zip(expected).filter(|(a, b)| a != b).count();
        assert_eq!(
            differing, 0,
            "frame {t}: {differing} pixels differ from the library"
        );
        for id in [1, 2] {
            assert!(ours.contains(&id), "frame {t}: object {id} tracked");
        }
        assert!(out.join("overlays").join(format!("{t:05}.png")).is_file());
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tracking.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["frames_tracked"], 7);
    assert_eq!(summary["objects"], serde_json::json!([1, 2]));
    assert!(summary["frames_per_second"]
        .as_f64()
        .is_some_and(|v| v > 0.0));
}

#[test]
fn bad_prompts_and_frames_are_refused_naming_what_is_wrong() {
    let dir = workspace_dir();
    let (checkpoint, config) = official_files(dir.path());
    let frames = clip();
    let folder = write_frames(dir.path(), &frames[..2]);
    let out = dir.path().join("out");
    let base = |prompt: &str| {
        vec![
            "--checkpoint".into(),
            checkpoint.clone().into_os_string(),
            "--model-config".into(),
            config.clone().into_os_string(),
            "--frames".into(),
            folder.clone().into_os_string(),
            "--out".into(),
            out.clone().into_os_string(),
            "--prompt".into(),
            prompt.into(),
        ]
    };
    let output = run(TRACK, &base("5:1:points=10,10,1"));
    assert_fails_naming_once(&output, "--prompt on frame 5");
    let output = run(TRACK, &base("0:1:points=10,10,3"));
    assert!(
        !output.status.success() && text(&output).contains("--prompt"),
        "{}",
        text(&output)
    );
    // A frame of another size.
    image::save_buffer(
        folder.join("00002.png"),
        &[0u8; 3 * 8 * 8],
        8,
        8,
        image::ExtendedColorType::Rgb8,
    )
    .expect("frame");
    let output = run(TRACK, &base("0:1:points=10,10,1"));
    assert_fails_naming_once(&output, "00002.png is 8×8");
}

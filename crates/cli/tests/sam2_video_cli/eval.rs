//! `eval-sam2 --video` on the synthetic VOS sample (`datasets/sample_vos`, val split: one video
//! whose object is hidden for a frame) with the reduced video model as an official checkpoint:
//! the report's J&F must equal the DAVIS measures recomputed here from the masks the command
//! wrote (`--out`) and the annotations; the frame-0 masks are the prompts.

use std::path::Path;

use crate::common::official::official_video_files;
use crate::common::{run, text, workspace};
use segburn_data::vos::{read_annotation, VosIndex, VosLayout};
use segburn_train::metric::vos::{DavisEvaluation, LabelMap};

const EVAL: &str = env!("CARGO_BIN_EXE_eval-sam2");

fn label_map(path: &Path) -> LabelMap {
    let a = read_annotation(path).unwrap_or_else(|e| panic!("{e}"));
    LabelMap::new(a.height, a.width, a.ids).expect("label map")
}

#[test]
fn video_j_and_f_equal_the_measures_of_the_written_masks() {
    let dir = tempfile::Builder::new()
        .prefix("segburn vos ü ")
        .tempdir()
        .expect("temporary folder");
    let (checkpoint, config) = official_video_files(dir.path());
    let root = workspace().join("datasets").join("sample_vos");
    let out = dir.path().join("masks é");
    let json = dir.path().join("report.json");
    let output = run(
        EVAL,
        &[
            "--video".as_ref(),
            root.as_os_str(),
            "--split".as_ref(),
            "val".as_ref(),
            "--checkpoint".as_ref(),
            checkpoint.as_os_str(),
            "--model-config".as_ref(),
            config.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
            "--json".as_ref(),
            json.as_os_str(),
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("J&F "), "{}", text(&output));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("json");
    let reported = report["jf_mean"].as_f64().expect("jf_mean");
    assert!(
        reported.is_finite() && (0.0..=1.0).contains(&reported),
        "{reported}"
    );

    let index = VosIndex::new(&VosLayout::new(&root), Some("val")).expect("sample index");
    let mut evaluation = DavisEvaluation::new();
    for video in index.videos() {
        let frames = &video.frames[video.first_annotated..];
        let annotations: Vec<LabelMap> = frames
            .iter()
            .map(|f| label_map(f.annotation.as_ref().expect("annotated")))
            .collect();
        let predictions: Vec<LabelMap> = frames
            .iter()
            .map(|f| label_map(&out.join(&video.name).join(format!("{}.png", f.name))))
            .collect();
        evaluation
            .add_sequence(&video.name, &annotations, &predictions)
            .expect("sequence");
    }
    let recomputed = evaluation.summary().expect("summary").jf_mean;
    assert_eq!(
        reported, recomputed,
        "the report is the measure of the written masks"
    );
    assert_eq!(report["sequences"], serde_json::json!(["occluder"]));
}

#[test]
fn a_missing_dataset_folder_is_named() {
    let dir = tempfile::Builder::new()
        .prefix("segburn vos ü ")
        .tempdir()
        .expect("temporary folder");
    let (checkpoint, _) = official_video_files(dir.path());
    let missing = dir.path().join("no such vos");
    let output = run(
        EVAL,
        &[
            "--video".as_ref(),
            missing.as_os_str(),
            "--checkpoint".as_ref(),
            checkpoint.as_os_str(),
        ],
    );
    assert!(!output.status.success());
    assert!(text(&output).contains("no such vos"), "{}", text(&output));
}

/// Copies `from` (a folder of files) to `to`.
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("folder");
    for entry in std::fs::read_dir(from).expect("read") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, to.join(path.file_name().expect("name"))).expect("copy");
    }
}

#[test]
fn davis_2017s_480p_folders_are_found_and_give_the_same_j_and_f() {
    let dir = tempfile::Builder::new()
        .prefix("segburn davis ü ")
        .tempdir()
        .expect("temporary folder");
    let (checkpoint, config) = official_video_files(dir.path());
    let sample = workspace().join("datasets").join("sample_vos");
    // The sample laid out as DAVIS 2017 ships: 480p subfolders, ImageSets/2017/val.txt.
    let davis = dir.path().join("DAVIS");
    for (folder, video) in [("JPEGImages", "occluder"), ("Annotations", "occluder")] {
        copy_folder(
            &sample.join(folder).join(video),
            &davis.join(folder).join("480p").join(video),
        );
    }
    std::fs::create_dir_all(davis.join("ImageSets").join("2017")).expect("ImageSets");
    std::fs::write(
        davis.join("ImageSets").join("2017").join("val.txt"),
        "occluder\n",
    )
    .expect("split");
    let report = |root: &Path, split: &str, name: &str| {
        let json = dir.path().join(name);
        let output = run(
            EVAL,
            &[
                "--video".as_ref(),
                root.as_os_str(),
                "--split".as_ref(),
                split.as_ref(),
                "--checkpoint".as_ref(),
                checkpoint.as_os_str(),
                "--model-config".as_ref(),
                config.as_os_str(),
                "--json".as_ref(),
                json.as_os_str(),
            ],
        );
        assert!(output.status.success(), "{}", text(&output));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("json");
        report["jf_mean"].as_f64().expect("jf_mean")
    };
    assert_eq!(
        report(&davis, "2017/val", "davis.json"),
        report(&sample, "val", "sample.json")
    );
}

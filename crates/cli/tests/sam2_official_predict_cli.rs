//! `predict-sam2` with an official-format SAM 2.1 checkpoint used directly: the reduced fixture
//! model written as an official `{"model": …}` state dict (video-memory tensors included) into a
//! folder whose name has spaces and non-ASCII characters, run on a non-square PNG and a JPEG.
//! The masks must be the library predictor's, at the photo's size. A file of no official size
//! is refused naming it.

mod common;

use std::path::{Path, PathBuf};

use burn::backend::flex::FlexDevice;
use common::official::{official_files, official_model, predict_args};
use common::{assert_fails_naming_once, run, text};
use segburn_data::decode::read_image;
use segburn_models::fixtures::fixture_path;
use segburn_models::sam2::{PromptSet, Sam2ImagePredictor};

const PREDICT: &str = env!("CARGO_BIN_EXE_predict-sam2");

/// A fixture file (`sam2_hiera/model.safetensors`: the formula weights of its listing).
fn fixture(relative: &str) -> PathBuf {
    fixture_path(relative).unwrap_or_else(|e| panic!("{e}"))
}

/// The folder every file of a test goes into.
fn workspace_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("segburn official ü 模型 ")
        .tempdir()
        .expect("temporary folder")
}

fn copy_photo(from: PathBuf, to: PathBuf) -> PathBuf {
    std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    to
}

/// What the library predictor gives for `set`: the mask of the highest predicted IoU, 0/255.
fn library_mask(checkpoint: &Path, photo: &Path, set: PromptSet, multimask: bool) -> Vec<u8> {
    let device = FlexDevice;
    let model = official_model(checkpoint);
    let image = read_image(photo).unwrap_or_else(|e| panic!("{e}"));
    let predictor =
        Sam2ImagePredictor::set_image(&model, &image.pixels, [image.height, image.width], &device)
            .expect("encoder");
    let prediction = predictor.predict(&[set], None, multimask).expect("predict");
    let ious: Vec<f32> = prediction.iou_pred.into_data().iter::<f32>().collect();
    assert_eq!(ious.len(), if multimask { 3 } else { 1 });
    let best = (0..ious.len())
        .reduce(|b, i| if ious[i] > ious[b] { i } else { b })
        .expect("a mask");
    let masks = prediction.masks;
    assert_eq!(masks.dims(), [1, ious.len(), image.height, image.width]);
    masks
        .narrow(1, best, 1)
        .into_data()
        .iter::<f32>()
        .map(|v| if v > 0.0 { 255 } else { 0 })
        .collect()
}

#[test]
fn official_checkpoint_masks_equal_the_library_predictor_at_the_photo_size() {
    let dir = workspace_dir();
    let (checkpoint, config) = official_files(dir.path());
    let png = copy_photo(
        fixture("sam2_hiera/image.png"),
        dir.path().join("photo ß.png"),
    );
    let jpeg = copy_photo(
        fixture("pipeline/butterfly.jpg"),
        dir.path().join("papillon è.jpg"),
    );
    // (photo, width, height, prompt flags, the same prompts for the library, multimask)
    let cases = [
        (
            &png,
            320,
            240,
            vec!["--points", "150,110,1"],
            PromptSet {
                points: vec![[150.0, 110.0]],
                labels: vec![1],
                bbox: None,
            },
            true,
        ),
        (
            &jpeg,
            493,
            356,
            vec!["--box", "60,40,420,300", "--points", "250,170,0"],
            PromptSet {
                points: vec![[250.0, 170.0]],
                labels: vec![0],
                bbox: Some([60.0, 40.0, 420.0, 300.0]),
            },
            false,
        ),
        // --multimask overrides the rule: one mask for a single click.
        (
            &png,
            320,
            240,
            vec!["--points", "60,200,1", "--multimask", "single"],
            PromptSet {
                points: vec![[60.0, 200.0]],
                labels: vec![1],
                bbox: None,
            },
            false,
        ),
    ];
    let out = dir.path().join("out ü");
    for (photo, width, height, flags, set, multimask) in cases {
        let mut args = predict_args(&checkpoint, &config, photo, &out);
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        let output = run(PREDICT, &args);
        let message = text(&output);
        assert!(output.status.success(), "{message}");
        assert!(
            message.contains("the model of --model-config")
                && message.contains("video-memory tensors not used: 91"),
            "{message}"
        );
        // The summary lists the three proposals' IoUs only when there are three.
        assert_eq!(message.contains(" of 3: "), multimask, "{message}");
        let stem = photo.file_stem().expect("stem").to_string_lossy();
        let written = image::open(out.join(format!("{stem}_mask.png")))
            .unwrap_or_else(|e| panic!("{stem}_mask.png: {e}\n{message}"))
            .to_luma8();
        assert_eq!(written.dimensions(), (width, height), "{message}");
        let overlay = image::open(out.join(format!("{stem}_overlay.png"))).expect("overlay");
        assert_eq!((overlay.width(), overlay.height()), (width, height));
        let expected = library_mask(&checkpoint, photo, set, multimask);
        let differing = written
            .as_raw()
            .iter()
            .zip(&expected)
            .filter(|(a, b)| a != b)
            .count();
        let area = expected.iter().filter(|&&m| m > 0).count();
        println!(
            "{stem}: {area} mask pixels of {}, {differing} differ",
            expected.len()
        );
        assert_eq!(
            differing, 0,
            "{stem}: the CLI's mask differs from the library's"
        );
        assert!(
            area > 0 && area < expected.len(),
            "{stem}: a constant mask ({area} px) would not test the comparison"
        );
    }
}

#[test]
fn a_checkpoint_of_no_official_size_is_refused_naming_it() {
    let dir = workspace_dir();
    let (checkpoint, config) = official_files(dir.path());
    let photo = fixture("sam2_hiera/image.png");
    let out = dir.path().join("out");
    let predict = |checkpoint: &Path, extra: &[&std::ffi::OsStr]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "--checkpoint".as_ref(),
            checkpoint.as_os_str(),
            photo.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
            "--points".as_ref(),
            "10,10,1".as_ref(),
        ];
        args.extend_from_slice(extra);
        run(PREDICT, &args)
    };
    // The reduced model without its configuration: named, with the way out.
    let output = predict(&checkpoint, &[]);
    assert_fails_naming_once(
        &output,
        &format!(
            "{} is not an official SAM 2.1 image model",
            checkpoint.display()
        ),
    );
    assert!(
        text(&output).contains("--model-config FILE"),
        "{}",
        text(&output)
    );
    // The official `.pt` container holding only 13 tensors.
    let subset = dir.path().join("subset ü.pt");
    std::fs::copy(
        fixture("sam2_hiera/model_subset_official_format.pt"),
        &subset,
    )
    .expect("copy");
    let output = predict(&subset, &[]);
    assert_fails_naming_once(
        &output,
        &format!(
            "{} is not an official SAM 2.1 image model",
            subset.display()
        ),
    );
    // With the configuration, the subset is strictly short of tensors.
    let output = predict(&subset, &["--model-config".as_ref(), config.as_os_str()]);
    let message = text(&output);
    assert!(!output.status.success(), "{message}");
    assert!(
        message.contains(&subset.display().to_string()) && message.contains("missing"),
        "{message}"
    );
    // A configuration file that is not one.
    let bad = dir.path().join("bad config.json");
    std::fs::write(&bad, "{\"prompt_encoder\": 3}").expect("write");
    let output = predict(&checkpoint, &["--model-config".as_ref(), bad.as_os_str()]);
    assert_fails_naming_once(&output, &format!("--model-config {}", bad.display()));
    assert!(
        !out.exists(),
        "nothing is written when the model cannot be built"
    );
}

/// `--mask-input` alone refines the mask of an earlier run, as the official
/// `predict(mask_input=…)`: a click writes `<stem>_low_res.safetensors`; feeding it back with no
/// click gives the library predictor's mask for that low-res mask alone, pixel for pixel.
#[test]
fn a_mask_alone_refines_the_previous_run_like_the_library_predictor() {
    let dir = workspace_dir();
    let (checkpoint, config) = official_files(dir.path());
    let photo = copy_photo(
        fixture("sam2_hiera/image.png"),
        dir.path().join("photo ß.png"),
    );
    let (first, second) = (dir.path().join("first"), dir.path().join("second ü"));
    let predict = |out: &Path, prompt: [&std::ffi::OsStr; 2]| {
        let mut args = predict_args(&checkpoint, &config, &photo, out);
        args.extend(prompt);
        let output = run(PREDICT, &args);
        assert!(output.status.success(), "{}", text(&output));
    };
    predict(&first, ["--points".as_ref(), "150,110,1".as_ref()]);
    let low_res = first.join("photo ß_low_res.safetensors");
    predict(&second, ["--mask-input".as_ref(), low_res.as_os_str()]);
    let written = image::open(second.join("photo ß_mask.png"))
        .expect("refined mask")
        .to_luma8();

    let device = FlexDevice;
    let model = official_model(&checkpoint);
    let image = read_image(&photo).unwrap_or_else(|e| panic!("{e}"));
    let predictor =
        Sam2ImagePredictor::set_image(&model, &image.pixels, [image.height, image.width], &device)
            .expect("encoder");
    let click = PromptSet {
        points: vec![[150.0, 110.0]],
        labels: vec![1],
        bbox: None,
    };
    let previous = predictor.predict(&[click], None, true).expect("click");
    let ious: Vec<f32> = previous.iou_pred.into_data().iter::<f32>().collect();
    let best = (0..3)
        .reduce(|b, i| if ious[i] > ious[b] { i } else { b })
        .expect("a mask");
    // `--multimask auto` gives one mask for a prompt that is not a single click.
    let refined = predictor
        .predict(
            &[PromptSet::default()],
            Some(previous.low_res_masks.narrow(1, best, 1)),
            false,
        )
        .expect("mask alone");
    let expected: Vec<u8> = refined
        .masks
        .into_data()
        .iter::<f32>()
        .map(|v| if v > 0.0 { 255 } else { 0 })
        .collect();
    let differing = written
        .as_raw()
        .iter()
        .zip(&expected)
        .filter(|(a, b)| a != b)
        .count();
    let area = expected.iter().filter(|&&m| m > 0).count();
    assert_eq!(written.as_raw().len(), expected.len());
    assert_eq!(
        differing, 0,
        "the CLI's refined mask differs from the library's"
    );
    assert!(
        area > 0 && area < expected.len(),
        "a constant mask ({area} px) would not test the comparison"
    );
}

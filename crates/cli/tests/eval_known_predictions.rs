//! The evaluation of a known prediction set equals the hand-computed metrics: a stand-in network
//! whose prediction is set by the image (class 1 where the red channel is bright) runs through
//! the same `Evaluator` as `eval`, on a two-image dataset written to a folder with spaces and
//! non-ASCII characters in its path.

use std::path::Path;

use burn::backend::Flex;
use burn::tensor::Tensor;
use segburn_data::{DataConfig, DatasetIndex, Layout, Loader, Mode};
use segburn_models::pidnet::PidNetError;
use segburn_train::inference::{EvalStep, Evaluator, InferenceConfig, SegmentationNet};
use segburn_train::metric::MetricReport;

/// Full-resolution logits `[-red, red]`: class 1 where the normalised red channel is positive.
struct RedIsForeground;

impl SegmentationNet<Flex> for RedIsForeground {
    fn logits(&self, images: Tensor<Flex, 4>) -> Result<Tensor<Flex, 4>, PidNetError> {
        let [n, _, h, w] = images.dims();
        let red = images.slice([0..n, 0..1, 0..h, 0..w]);
        Ok(Tensor::cat(vec![-red.clone(), red], 1))
    }

    fn input_multiple(&self) -> usize {
        1
    }
}

fn save(dir: &Path, name: &str, image: image::DynamicImage) {
    std::fs::create_dir_all(dir).unwrap();
    image.save(dir.join(name)).unwrap();
}

#[test]
fn metrics_of_a_known_prediction_set_match_the_hand_computed_values() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("données d'essai").join("数据");
    let (images, masks) = (root.join("images/{split}"), root.join("masks/{split}"));
    let (image_dir, mask_dir) = (root.join("images/val"), root.join("masks/val"));
    // Image a: red on the left half (predicted 1), black on the right (predicted 0).
    // Labels a: class 1 everywhere except the last row, which is ignored.
    let a = image::RgbImage::from_fn(4, 4, |x, _| {
        image::Rgb(if x < 2 { [255, 0, 0] } else { [0, 0, 0] })
    });
    let a_label =
        image::GrayImage::from_fn(4, 4, |_, y| image::Luma([if y == 3 { 255 } else { 1 }]));
    // Image b: black (predicted 0 everywhere). Labels b: class 1 in the first column, else 0.
    let b = image::RgbImage::from_pixel(4, 4, image::Rgb([0, 0, 0]));
    let b_label = image::GrayImage::from_fn(4, 4, |x, _| image::Luma([u8::from(x == 0)]));
    save(&image_dir, "a.png", a.into());
    save(&image_dir, "b.png", b.into());
    save(&mask_dir, "a.png", a_label.into());
    save(&mask_dir, "b.png", b_label.into());

    let config = DataConfig {
        layout: Layout::folder_pair(
            images,
            masks,
            vec!["background".into(), "foreground".into()],
        ),
        ..DataConfig::default()
    };
    let index = DatasetIndex::new(&config.layout, "val", config.ignore_index).unwrap();
    let loader = Loader::new(index, &config, Mode::Validation, 0).unwrap();
    let net = RedIsForeground;
    let evaluator =
        Evaluator::<Flex, _>::new(&net, InferenceConfig::default(), 2, 255, Default::default())
            .unwrap();
    let mut seen = Vec::new();
    let mut record = |step: &EvalStep<'_>| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        seen.push((
            step.done,
            step.total,
            step.batch.names.clone(),
            step.predictions.to_vec(),
        ));
        Ok(())
    };
    let matrix = evaluator.run(&loader, &mut record).unwrap();

    // Rows = ground truth: background [12 right, 0 wrong]; foreground [10 missed, 6 right].
    assert_eq!(matrix.matrix(), vec![12, 0, 10, 6]);
    let report = MetricReport::new(&matrix, &["background", "foreground"]).unwrap();
    let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    close(report.classes[0].iou.unwrap(), 12.0 / 22.0);
    close(report.classes[1].iou.unwrap(), 6.0 / 16.0);
    close(report.mean_iou, (12.0 / 22.0 + 6.0 / 16.0) / 2.0);
    close(
        report.mean_iou_all_classes,
        (12.0 / 22.0 + 6.0 / 16.0) / 2.0,
    );
    close(report.pixel_accuracy, 18.0 / 28.0);
    close(report.mean_class_accuracy, (1.0 + 6.0 / 16.0) / 2.0);
    assert_eq!(report.total_pixels, 28);

    // The callback saw each image once, in order, with its predictions.
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].0, seen[0].1), (1, 2));
    assert_eq!(seen[0].3, [1, 1, 0, 0].repeat(4));
    assert_eq!(seen[1].3, vec![0; 16]);
}

/// Validation sees every sample exactly once, in dataset order, whatever the validation loader's
/// batch size and workers: the experiment is read from a file whose `val_loader` is written
/// partly, as `configs/quickstart.ron` writes it (the missing fields once took the training
/// loader's `drop_last: true, shuffle: true`, so batch 5 of 12 images evaluated 10).
#[test]
fn validation_metrics_do_not_depend_on_the_val_loader_settings() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("val batches é");
    let (image_dir, mask_dir) = (root.join("images/val"), root.join("masks/val"));
    // 12 images of 6x4: image k is red on its first k % 6 columns; its label is class 1 on
    // the first (k + 1) % 6 columns and ignores row 3 of the odd images.
    for k in 0..12u32 {
        let image = image::RgbImage::from_fn(6, 4, |x, _| {
            image::Rgb(if x < k % 6 { [255, 0, 0] } else { [0, 0, 0] })
        });
        let label = image::GrayImage::from_fn(6, 4, |x, y| {
            image::Luma([if y == 3 && k % 2 == 1 {
                255
            } else {
                u8::from(x < (k + 1) % 6)
            }])
        });
        save(&image_dir, &format!("{k:02}.png"), image.into());
        save(&mask_dir, &format!("{k:02}.png"), label.into());
    }
    let run = |val_loader: &str, overrides: &[String]| {
        let file = root.join("experiment.ron");
        let text = format!(
            "(model: (num_classes: 2), data: (layout: FolderPair(images: {:?}, masks: {:?}, \
             classes: [\"background\", \"foreground\"]), val_loader: {val_loader}))",
            root.join("images/{split}"),
            root.join("masks/{split}")
        );
        std::fs::write(&file, text).unwrap();
        use segburn::experiment::ExperimentFile;
        let experiment = segburn::experiment::PidNetExperiment::load(&file, overrides).unwrap();
        let data = &experiment.data;
        let index = DatasetIndex::new(&data.layout, "val", data.ignore_index).unwrap();
        let loader = Loader::new(index, data, Mode::Validation, experiment.train.seed).unwrap();
        let evaluator = Evaluator::<Flex, _>::new(
            &RedIsForeground,
            InferenceConfig::default(),
            2,
            255,
            Default::default(),
        )
        .unwrap();
        let mut names = Vec::new();
        let mut record =
            |step: &EvalStep<'_>| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
                names.extend(step.batch.names.iter().cloned());
                Ok(())
            };
        let matrix = evaluator.run(&loader, &mut record).unwrap();
        let report = MetricReport::new(&matrix, &["background", "foreground"]).unwrap();
        (matrix.matrix(), report.total_pixels, report.mean_iou, names)
    };
    let reference = run("(batch_size: 1, num_workers: 1)", &[]);
    let expected_names: Vec<String> = (0..12).map(|k| format!("{k:02}")).collect();
    assert_eq!(reference.3, expected_names);
    // 12 images of 24 pixels, 6 of them with a row of 6 ignored pixels.
    assert_eq!(reference.1, 12 * 24 - 6 * 6);
    let settings = [
        ("(batch_size: 5, num_workers: 2)", vec![]),
        ("(batch_size: 12, num_workers: 2)", vec![]),
        ("(batch_size: 5, num_workers: 1)", vec![]),
        ("(batch_size: 1, num_workers: 2)", vec![]),
        (
            "(num_workers: 2)",
            vec!["data.val_loader.batch_size=5".to_string()],
        ),
    ];
    for (val_loader, overrides) in settings {
        let got = run(val_loader, &overrides);
        assert_eq!(got, reference, "val_loader {val_loader} {overrides:?}");
    }
}

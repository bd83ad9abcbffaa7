//! Whole-split checks for `train --check-data`: every problem, not just the first, and the
//! class pixel frequencies.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::config::DataConfig;
use crate::decode::{read_image_with, read_label, Orientation};
use crate::error::DataError;
use crate::labels::LabelMap;

/// What [`validate`] found in one split.
#[derive(Debug)]
pub struct ValidationReport {
    pub split: String,
    /// Samples the index found (with both files present).
    pub samples: usize,
    /// Samples whose image and label decoded, matched in size and had valid values.
    pub good_samples: usize,
    /// Every problem, in sample order after the indexing problems.
    pub problems: Vec<DataError>,
    /// Class names, in training-id order.
    pub classes: Vec<String>,
    /// Pixels per training id over the good samples.
    pub class_pixels: Vec<u64>,
    /// Pixels carrying the ignore index over the good samples.
    pub ignored_pixels: u64,
}

impl ValidationReport {
    /// Whether the split can be trained on as it is.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.good_samples > 0
    }

    /// The share of labelled (non-ignored) pixels of each class, in `[0, 1]`.
    pub fn class_frequencies(&self) -> Vec<f64> {
        let total: u64 = self.class_pixels.iter().sum();
        self.class_pixels
            .iter()
            .map(|&n| {
                if total == 0 {
                    0.0
                } else {
                    n as f64 / total as f64
                }
            })
            .collect()
    }
}

impl fmt::Display for ValidationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "split `{}`: {} samples indexed, {} good, {} problems",
            self.split,
            self.samples,
            self.good_samples,
            self.problems.len()
        )?;
        for problem in &self.problems {
            writeln!(f, "  error: {problem}")?;
        }
        let labelled: u64 = self.class_pixels.iter().sum();
        writeln!(
            f,
            "class pixel frequencies ({labelled} labelled pixels, {} ignored):",
            self.ignored_pixels
        )?;
        for ((name, pixels), share) in self
            .classes
            .iter()
            .zip(&self.class_pixels)
            .zip(self.class_frequencies())
        {
            let note = if *pixels == 0 { "  (absent)" } else { "" };
            writeln!(
                f,
                "  {name:>16}: {:7.3}%  {pixels:>12}{note}",
                share * 100.0
            )?;
        }
        Ok(())
    }
}

/// Scans split `split` of `config.layout`: indexes it, decodes every image and label on
/// `train_loader.num_workers` threads, and reports every problem with the class frequencies.
/// Only an unusable configuration (e.g. a class list that collides with the ignore index) is an
/// `Err`; everything about the files is in the report.
pub fn validate(config: &DataConfig, split: &str) -> Result<ValidationReport, DataError> {
    let scan = config.layout.scan(split);
    let encoding = scan
        .encoding
        .clone()
        .unwrap_or_else(|| config.layout.encoding());
    let labels = LabelMap::new(&encoding, config.ignore_index)?;
    let samples = scan.samples;
    let orientation = config.image_orientation();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, SampleCheck)>> = Mutex::new(Vec::new());
    let threads = config
        .train_loader
        .resolved_workers()
        .clamp(1, samples.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(entry) = samples.get(i) else { break };
                let check = check_sample(&entry.image, &entry.label, &labels, orientation);
                if let Ok(mut results) = results.lock() {
                    results.push((i, check));
                }
            });
        }
    });
    let mut results = results
        .into_inner()
        .unwrap_or_else(|poison| poison.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let mut report = ValidationReport {
        split: split.to_string(),
        samples: samples.len(),
        good_samples: 0,
        problems: scan.problems,
        classes: labels.classes().to_vec(),
        class_pixels: vec![0; labels.num_classes()],
        ignored_pixels: 0,
    };
    for (_, check) in results {
        match check {
            Ok(histogram) => {
                report.good_samples += 1;
                for (class, pixels) in report.class_pixels.iter_mut().enumerate() {
                    *pixels += histogram[class];
                }
                report.ignored_pixels += histogram[usize::from(labels.ignore_index())];
            }
            Err(problems) => report.problems.extend(problems),
        }
    }
    Ok(report)
}

/// A good sample's training-id histogram, or every problem of the sample.
type SampleCheck = Result<Box<[u64; 256]>, Vec<DataError>>;

fn check_sample(
    image_path: &std::path::Path,
    label_path: &std::path::Path,
    labels: &LabelMap,
    orientation: Orientation,
) -> SampleCheck {
    let image = read_image_with(image_path, orientation);
    let label = read_label(label_path, labels);
    match (image, label) {
        (Ok(image), Ok(label)) => {
            if (image.width, image.height) != (label.width, label.height) {
                return Err(vec![DataError::SizeMismatch {
                    image: image_path.to_path_buf(),
                    label: label_path.to_path_buf(),
                    image_width: image.width,
                    image_height: image.height,
                    label_width: label.width,
                    label_height: label.height,
                }]);
            }
            let mut histogram = Box::new([0u64; 256]);
            for &p in &label.pixels {
                histogram[usize::from(p)] += 1;
            }
            Ok(histogram)
        }
        (image, label) => Err(image.err().into_iter().chain(label.err()).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cityscapes, small_config, write_png};
    use crate::Layout;

    #[test]
    fn every_problem_of_a_split_is_reported_with_frequencies() {
        let dir = tempfile::tempdir().expect("temp dir");
        let images = cityscapes(dir.path(), "train", "hamburg", 6, 10, 4);
        let label = |image: &std::path::Path| {
            let text = image.display().to_string();
            std::path::PathBuf::from(
                text.replace("leftImg8bit/train", "gtFine/train")
                    .replace("_leftImg8bit.png", "_gtFine_labelIds.png"),
            )
        };
        // 1: missing label; 2: truncated image; 3: size mismatch; 4: bad values.
        std::fs::remove_file(label(&images[1])).expect("remove");
        std::fs::write(&images[2], b"\x89PNG\r\n\x1a\n").expect("truncate");
        write_png(&label(&images[3]), 10, 5, 1, &[7; 50]);
        let mut bad = vec![7u8; 40];
        bad[..3].fill(99);
        write_png(&label(&images[4]), 10, 4, 1, &bad);
        let config = small_config(Layout::Cityscapes {
            root: dir.path().to_path_buf(),
        });
        let report = validate(&config, "train").expect("a report");
        assert!(!report.is_ok());
        assert_eq!((report.samples, report.good_samples), (5, 2));
        let kinds: Vec<&str> = report
            .problems
            .iter()
            .map(|p| match p {
                DataError::MissingLabel { .. } => "missing",
                DataError::Decode { .. } => "decode",
                DataError::SizeMismatch { .. } => "size",
                DataError::BadLabelValues { .. } => "values",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["missing", "decode", "size", "values"]);
        assert!(report.problems[3]
            .to_string()
            .contains("value 99 on 3 pixels"));
        // Samples 0 and 5 are good: 2 x 40 pixels, road/sidewalk/building/car or void (255).
        let labelled: u64 = report.class_pixels.iter().sum();
        assert_eq!(labelled + report.ignored_pixels, 80);
        assert!(report.class_pixels[0] > 0 && report.class_pixels[13] > 0);
        assert_eq!(report.class_pixels[10], 0, "no sky in the fixtures");
        let text = report.to_string();
        assert!(
            text.contains("5 samples indexed, 2 good, 4 problems"),
            "{text}"
        );
        assert!(text.contains("(absent)"), "{text}");
        let total: f64 = report.class_frequencies().iter().sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn an_empty_or_missing_split_is_a_problem_not_a_crash() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = small_config(Layout::Cityscapes {
            root: dir.path().join("nowhere"),
        });
        let report = validate(&config, "val").expect("a report");
        assert!(!report.is_ok());
        assert_eq!(report.samples, 0);
        assert!(matches!(report.problems[..], [DataError::Io { .. }]));
    }

    #[test]
    fn the_bundled_sample_dataset_is_valid_and_has_every_drawn_class() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
        let config = small_config(Layout::Cityscapes { root });
        for (split, count) in [("train", 48), ("val", 12)] {
            let report = validate(&config, split).expect("a report");
            assert!(report.is_ok(), "{report}");
            assert_eq!(report.good_samples, count);
            // road, sidewalk, building, pole, sign, vegetation, sky, person, car.
            for class in [0, 1, 2, 5, 7, 8, 10, 11, 13] {
                assert!(
                    report.class_pixels[class] > 0,
                    "{split}: class {class}\n{report}"
                );
            }
        }
    }
}

//! Whole-split checks for `train --check-data`: every problem, not just the first, and the
//! class pixel frequencies.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::config::DataConfig;
use crate::decode::{read_image, read_label};
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
                let check = check_sample(&entry.image, &entry.label, &labels);
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
) -> SampleCheck {
    let image = read_image(image_path);
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

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
pub struct SplitScan {
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

impl SplitScan {
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

impl fmt::Display for SplitScan {
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
pub fn scan_split(config: &DataConfig, split: &str) -> Result<SplitScan, DataError> {
    check_split(config, split, true)
}

/// The labelled pixels of each class over `split` (what class weights computed from the data
/// start from): every label is decoded on `train_loader.num_workers` threads, the images are
/// not. The first file that cannot be read or holds invalid values is the error.
pub fn class_pixel_counts(config: &DataConfig, split: &str) -> Result<Vec<u64>, DataError> {
    let report = check_split(config, split, false)?;
    // The binary-mask hint is advice about the encoding, not an unreadable file.
    let mut problems = report
        .problems
        .into_iter()
        .filter(|p| !matches!(p, DataError::LooksLikeBinaryMasks { .. }));
    match problems.next() {
        Some(problem) => Err(problem),
        None => Ok(report.class_pixels),
    }
}

fn check_split(
    config: &DataConfig,
    split: &str,
    with_images: bool,
) -> Result<SplitScan, DataError> {
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
                let image = with_images.then_some(entry.image.as_path());
                let check = check_sample(image, &entry.label, &labels, orientation);
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
    let mut report = SplitScan {
        split: split.to_string(),
        samples: samples.len(),
        good_samples: 0,
        problems: scan.problems,
        classes: labels.classes().to_vec(),
        class_pixels: vec![0; labels.num_classes()],
        ignored_pixels: 0,
    };
    // Samples that may be 0/255 masks: foreground only as 255 (judged below, once the whole
    // split is counted), or values that are no class at all.
    let mut only_ignored_foreground = Vec::new();
    let mut bad_values = Vec::new();
    for (i, check) in results {
        match check {
            Ok(histogram) => {
                report.good_samples += 1;
                for (class, pixels) in report.class_pixels.iter_mut().enumerate() {
                    *pixels += histogram[class];
                }
                report.ignored_pixels += histogram[usize::from(labels.ignore_index())];
                if histogram[1] == 0 && histogram[255] > 0 {
                    only_ignored_foreground.push(i);
                }
            }
            Err(problems) => {
                if problems
                    .iter()
                    .any(|p| matches!(p, DataError::BadLabelValues { .. }))
                {
                    bad_values.push(i);
                }
                report.problems.extend(problems);
            }
        }
    }
    if labels.may_misread_binary_masks() {
        // A two-class split in which class 1 never appears but 255 does was drawn as 0/255.
        if report.class_pixels[1] > 0 {
            only_ignored_foreground.clear();
        }
        let mut suspects: Vec<usize> = only_ignored_foreground
            .into_iter()
            .chain(bad_values)
            .collect();
        suspects.sort_unstable();
        if let Some(&first) = suspects.first() {
            report.problems.push(DataError::LooksLikeBinaryMasks {
                split: split.to_string(),
                files: suspects.len(),
                samples: samples.len(),
                example: samples[first].label.clone(),
            });
        }
    }
    Ok(report)
}

/// A good sample's training-id histogram, or every problem of the sample.
type SampleCheck = Result<Box<[u64; 256]>, Vec<DataError>>;

/// Checks one sample; without `image_path` only the label is read.
fn check_sample(
    image_path: Option<&std::path::Path>,
    label_path: &std::path::Path,
    labels: &LabelMap,
    orientation: Orientation,
) -> SampleCheck {
    let image = image_path
        .map(|path| read_image_with(path, orientation))
        .transpose();
    let label = read_label(label_path, labels);
    match (image, label) {
        (Ok(image), Ok(label)) => {
            if let (Some(image), Some(image_path)) = (&image, image_path) {
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
#[path = "scan_tests.rs"]
mod tests;

//! A printable, serialisable summary of a [`ConfusionMatrix`].

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::confusion::ConfusionMatrix;
use super::error::MetricError;

/// The metrics of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    /// Class name.
    pub name: String,
    /// `TP / (TP + FP + FN)`; `None` when absent from ground truth and prediction.
    pub iou: Option<f64>,
    /// `TP / GT pixels`; `None` without ground-truth pixels.
    pub accuracy: Option<f64>,
    /// Ground-truth pixels of the class.
    pub gt_pixels: u64,
    /// Pixels predicted as the class.
    pub predicted_pixels: u64,
    /// Correctly predicted pixels.
    pub true_positives: u64,
}

/// Per-class and summary metrics of a split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricReport {
    /// One entry per class, in class-id order.
    pub classes: Vec<ClassMetrics>,
    /// Mean IoU over classes present in ground truth or prediction (Cityscapes rule).
    pub mean_iou: f64,
    /// Mean IoU over all classes, absent ones counting 0 (official PIDNet `eval.py`).
    pub mean_iou_all_classes: f64,
    /// Correct pixels / non-ignored pixels.
    pub pixel_accuracy: f64,
    /// Mean per-class accuracy over classes present in the ground truth.
    pub mean_class_accuracy: f64,
    /// Non-ignored ground-truth pixels.
    pub total_pixels: u64,
}

impl MetricReport {
    /// Summarises `matrix` with one name per class.
    pub fn new<S: AsRef<str>>(
        matrix: &ConfusionMatrix,
        class_names: &[S],
    ) -> Result<Self, MetricError> {
        if class_names.len() != matrix.num_classes() {
            return Err(MetricError::ClassCountMismatch {
                expected: matrix.num_classes(),
                got: class_names.len(),
            });
        }
        let classes = class_names
            .iter()
            .enumerate()
            .map(|(c, name)| ClassMetrics {
                name: name.as_ref().to_string(),
                iou: matrix.iou(c),
                accuracy: matrix.class_accuracy(c),
                gt_pixels: matrix.ground_truth_pixels(c),
                predicted_pixels: matrix.predicted_pixels(c),
                true_positives: matrix.true_positives(c),
            })
            .collect();
        Ok(Self {
            classes,
            mean_iou: matrix.mean_iou(),
            mean_iou_all_classes: matrix.mean_iou_all_classes(),
            pixel_accuracy: matrix.pixel_accuracy(),
            mean_class_accuracy: matrix.mean_class_accuracy(),
            total_pixels: matrix.total_pixels(),
        })
    }

    /// Summarises `matrix` with the names `class_0`, `class_1`, …
    pub fn with_numbered_classes(matrix: &ConfusionMatrix) -> Self {
        let names: Vec<String> = (0..matrix.num_classes())
            .map(|c| format!("class_{c}"))
            .collect();
        Self::new(matrix, &names).expect("one name per class")
    }

    /// CSV: a header, one row per class, then three summary rows whose `class` is
    /// `mean` (mIoU over present classes, mean class accuracy), `mean_all_classes` (the
    /// all-classes mIoU) and `overall` (pixel accuracy, total pixels). Absent values are empty.
    pub fn to_csv(&self) -> String {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
        let mut out =
            String::from("class,iou,accuracy,gt_pixels,predicted_pixels,true_positives\n");
        for c in &self.classes {
            out += &format!(
                "{},{},{},{},{},{}\n",
                csv_field(&c.name),
                opt(c.iou),
                opt(c.accuracy),
                c.gt_pixels,
                c.predicted_pixels,
                c.true_positives
            );
        }
        out += &format!(
            "mean,{:.6},{:.6},,,\n",
            self.mean_iou, self.mean_class_accuracy
        );
        out += &format!("mean_all_classes,{:.6},,,,\n", self.mean_iou_all_classes);
        out += &format!(
            "overall,,{:.6},{},,\n",
            self.pixel_accuracy, self.total_pixels
        );
        out
    }

    /// Pretty-printed JSON of the whole report.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    /// Writes [`to_csv`](Self::to_csv) to `path`.
    pub fn write_csv(&self, path: &Path) -> Result<(), MetricError> {
        write(path, &self.to_csv())
    }

    /// Writes [`to_json`](Self::to_json) to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), MetricError> {
        write(path, &self.to_json())
    }
}

fn write(path: &Path, text: &str) -> Result<(), MetricError> {
    std::fs::write(path, text).map_err(|source| MetricError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Quotes a CSV field when it needs it (RFC 4180).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

impl fmt::Display for MetricReport {
    /// An aligned table: class, IoU and accuracy in %, pixel counts; then the summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .classes
            .iter()
            .map(|c| c.name.chars().count())
            .chain([5])
            .max()
            .unwrap_or(5);
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2}", 100.0 * v));
        writeln!(
            f,
            "{:<width$}  {:>7}  {:>7}  {:>14}  {:>14}",
            "class", "IoU %", "acc %", "gt pixels", "pred pixels"
        )?;
        for c in &self.classes {
            writeln!(
                f,
                "{:<width$}  {:>7}  {:>7}  {:>14}  {:>14}",
                c.name,
                pct(c.iou),
                pct(c.accuracy),
                c.gt_pixels,
                c.predicted_pixels
            )?;
        }
        writeln!(f, "{}", "-".repeat(width + 52))?;
        writeln!(
            f,
            "mIoU {:.2} % (classes present)   mIoU {:.2} % (all classes)",
            100.0 * self.mean_iou,
            100.0 * self.mean_iou_all_classes
        )?;
        write!(
            f,
            "pixel accuracy {:.2} %   mean class accuracy {:.2} %   {} pixels",
            100.0 * self.pixel_accuracy,
            100.0 * self.mean_class_accuracy,
            self.total_pixels
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> MetricReport {
        let mut cm = ConfusionMatrix::new(3, 255);
        cm.update(&[0u8, 0, 1, 2, 1], &[0u8, 1, 1, 255, 1]).unwrap();
        MetricReport::new(&cm, &["road", "side, walk", "absent"]).unwrap()
    }

    #[test]
    fn summary_values_come_from_the_matrix() {
        let r = report();
        assert_eq!(r.classes[0].iou, Some(0.5));
        assert_eq!(r.classes[1].iou, Some(2.0 / 3.0));
        assert_eq!(r.classes[2].iou, None);
        assert!((r.mean_iou - (0.5 + 2.0 / 3.0) / 2.0).abs() < 1e-12);
        assert!((r.mean_iou_all_classes - (0.5 + 2.0 / 3.0) / 3.0).abs() < 1e-12);
        assert_eq!(r.total_pixels, 4);
        assert!((r.pixel_accuracy - 0.75).abs() < 1e-12);
    }

    #[test]
    fn table_is_aligned_with_names() {
        let text = report().to_string();
        println!("{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("road "));
        assert!(lines[2].starts_with("side, walk"));
        assert!(
            lines[3].contains(" - "),
            "absent class shows '-': {}",
            lines[3]
        );
        // Fixed-width, right-aligned columns: every row is as long as the header.
        assert!(
            lines[1..4].iter().all(|l| l.len() == lines[0].len()),
            "{text}"
        );
        assert!(text.contains("mIoU 58.33 % (classes present)"), "{text}");
    }

    #[test]
    fn csv_quotes_names_and_json_round_trips() {
        let r = report();
        let csv = r.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "class,iou,accuracy,gt_pixels,predicted_pixels,true_positives"
        );
        assert_eq!(lines[1], "road,0.500000,1.000000,1,2,1");
        assert!(lines[2].starts_with("\"side, walk\",0.666667,"));
        assert_eq!(lines[3], "absent,,,0,0,0");
        assert_eq!(lines[4], "mean,0.583333,0.833333,,,");
        assert!(lines.iter().all(|l| l.matches(',').count() >= 5));

        // serde_json parses floats to within an ulp, not bit-exactly.
        let back: MetricReport = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(back.classes.len(), 3);
        assert_eq!(back.classes[1].name, "side, walk");
        assert_eq!(back.classes[2].iou, None);
        assert_eq!(back.total_pixels, r.total_pixels);
        assert!((back.mean_iou_all_classes - r.mean_iou_all_classes).abs() < 1e-15);

        let dir = std::env::temp_dir().join(format!("segburn-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        r.write_csv(&dir.join("m.csv")).unwrap();
        r.write_json(&dir.join("m.json")).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("m.csv")).unwrap(), csv);
        let err = r
            .write_json(&dir.join("missing").join("m.json"))
            .unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wrong_number_of_names_is_an_error() {
        let cm = ConfusionMatrix::new(3, 255);
        assert!(MetricReport::new(&cm, &["a", "b"]).is_err());
    }
}

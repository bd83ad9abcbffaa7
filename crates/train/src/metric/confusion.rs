//! The confusion matrix every segmentation metric is computed from.

use burn::tensor::{backend::Backend, DType, Int, Tensor, TensorData};

use super::error::MetricError;

/// A `C × C` matrix of pixel counts, rows = ground truth, columns = prediction.
///
/// Ground-truth pixels equal to the ignore index are skipped. A prediction outside `0..C`
/// (e.g. the ignore value itself, which a model never emits but a saved prediction map may
/// hold) still counts in its ground-truth row, as a false negative of that class; it is kept in
/// an extra column so that pixel counts stay exact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfusionMatrix {
    num_classes: usize,
    ignore_index: i64,
    /// Row-major `C × (C + 1)`; the last column holds predictions outside `0..C`.
    counts: Vec<u64>,
}

impl ConfusionMatrix {
    /// An empty matrix for `num_classes` classes.
    pub fn new(num_classes: usize, ignore_index: i64) -> Self {
        Self {
            num_classes,
            ignore_index,
            counts: vec![0; num_classes * (num_classes + 1)],
        }
    }

    /// Number of classes C.
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// The ignore index.
    pub fn ignore_index(&self) -> i64 {
        self.ignore_index
    }

    /// Pixels of ground-truth class `gt` predicted as class `pred` (both `< C`).
    pub fn get(&self, gt: usize, pred: usize) -> u64 {
        assert!(
            gt < self.num_classes && pred < self.num_classes,
            "class out of range"
        );
        self.counts[gt * (self.num_classes + 1) + pred]
    }

    /// Pixels of ground-truth class `gt` whose prediction was outside `0..C`.
    pub fn invalid_predictions(&self, gt: usize) -> u64 {
        self.counts[gt * (self.num_classes + 1) + self.num_classes]
    }

    /// The `C × C` matrix, row-major (rows = ground truth), without the invalid predictions.
    pub fn matrix(&self) -> Vec<u64> {
        self.counts
            .chunks(self.num_classes + 1)
            .flat_map(|row| row[..self.num_classes].iter().copied())
            .collect()
    }

    /// Adds host predictions and labels (any integer type, same length, e.g. `[N·H·W]`).
    ///
    /// On error the matrix is left unchanged.
    pub fn update<P, G>(&mut self, predictions: &[P], labels: &[G]) -> Result<(), MetricError>
    where
        P: Copy + Into<i64>,
        G: Copy + Into<i64>,
    {
        if predictions.len() != labels.len() {
            return Err(MetricError::LengthMismatch {
                predictions: predictions.len(),
                labels: labels.len(),
            });
        }
        let classes = self.num_classes as u64;
        let stride = self.num_classes + 1;
        let ignore = self.ignore_index;
        // A local histogram keeps the matrix untouched if a bad label shows up half-way.
        let mut local = vec![0u64; self.counts.len()];
        for (&p, &g) in predictions.iter().zip(labels) {
            let g: i64 = g.into();
            if g == ignore {
                continue;
            }
            // Negative values wrap to huge u64s, so one comparison covers both ends.
            if g as u64 >= classes {
                return Err(MetricError::LabelOutOfRange {
                    value: g,
                    num_classes: self.num_classes,
                    ignore_index: ignore,
                });
            }
            let p: i64 = p.into();
            let column = if (p as u64) < classes {
                p as usize
            } else {
                self.num_classes
            };
            local[g as usize * stride + column] += 1;
        }
        self.counts.iter_mut().zip(local).for_each(|(c, l)| *c += l);
        Ok(())
    }

    /// Adds predicted class ids and labels, both `[N, H, W]` on the device (one download).
    pub fn update_from_predictions<B: Backend>(
        &mut self,
        predictions: Tensor<B, 3, Int>,
        labels: Tensor<B, 3, Int>,
    ) -> Result<(), MetricError> {
        let (p, l) = (
            predictions.shape().num_elements(),
            labels.shape().num_elements(),
        );
        if p != l {
            return Err(MetricError::LengthMismatch {
                predictions: p,
                labels: l,
            });
        }
        let both = Tensor::cat(vec![predictions.reshape([p]), labels.reshape([l])], 0);
        match host_ints(both.into_data()) {
            HostInts::I32(v) => self.update(&v[..p], &v[p..]),
            HostInts::I64(v) => self.update(&v[..p], &v[p..]),
        }
    }

    /// Adds the argmax of `logits` `[N, C, H, W]` (taken on the device) against `labels`
    /// `[N, H, W]`.
    pub fn update_from_logits<B: Backend>(
        &mut self,
        logits: Tensor<B, 4>,
        labels: Tensor<B, 3, Int>,
    ) -> Result<(), MetricError> {
        let predictions = self.argmax(logits)?;
        self.update_from_predictions(predictions, labels)
    }

    /// Adds the argmax of `logits` `[N, C, H, W]` against host labels (`N·H·W` values, e.g.
    /// straight from the data loader).
    pub fn update_from_logits_and_labels<B: Backend, G: Copy + Into<i64>>(
        &mut self,
        logits: Tensor<B, 4>,
        labels: &[G],
    ) -> Result<(), MetricError> {
        match host_ints(self.argmax(logits)?.into_data()) {
            HostInts::I32(v) => self.update(&v, labels),
            HostInts::I64(v) => self.update(&v, labels),
        }
    }

    fn argmax<B: Backend>(&self, logits: Tensor<B, 4>) -> Result<Tensor<B, 3, Int>, MetricError> {
        let [n, c, h, w] = logits.dims();
        if c != self.num_classes {
            return Err(MetricError::ClassCountMismatch {
                expected: self.num_classes,
                got: c,
            });
        }
        Ok(logits.argmax(1).reshape([n, h, w]))
    }

    /// Adds another matrix (e.g. from another thread or another half of the split).
    pub fn merge(&mut self, other: &Self) -> Result<(), MetricError> {
        if other.num_classes != self.num_classes {
            return Err(MetricError::ClassCountMismatch {
                expected: self.num_classes,
                got: other.num_classes,
            });
        }
        self.counts
            .iter_mut()
            .zip(&other.counts)
            .for_each(|(c, o)| *c += o);
        Ok(())
    }

    /// Pixels of class `c` predicted as `c`.
    pub fn true_positives(&self, c: usize) -> u64 {
        self.get(c, c)
    }

    /// Ground-truth pixels of class `c` (row sum, invalid predictions included).
    pub fn ground_truth_pixels(&self, c: usize) -> u64 {
        let stride = self.num_classes + 1;
        self.counts[c * stride..(c + 1) * stride].iter().sum()
    }

    /// Pixels predicted as class `c` (column sum).
    pub fn predicted_pixels(&self, c: usize) -> u64 {
        (0..self.num_classes).map(|gt| self.get(gt, c)).sum()
    }

    /// All non-ignored ground-truth pixels.
    pub fn total_pixels(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `TP / (TP + FP + FN)`, or `None` when the class is absent from both ground truth and
    /// prediction.
    pub fn iou(&self, c: usize) -> Option<f64> {
        let tp = self.true_positives(c);
        let union = self.ground_truth_pixels(c) + self.predicted_pixels(c) - tp;
        (union > 0).then(|| tp as f64 / union as f64)
    }

    /// Mean IoU over the classes with `TP + FP + FN > 0` (cityscapesscripts
    /// `evaluateImgLists`); 0 for an empty matrix.
    pub fn mean_iou(&self) -> f64 {
        mean((0..self.num_classes).filter_map(|c| self.iou(c)))
    }

    /// Mean IoU over all C classes, absent ones counting 0 (the official PIDNet `eval.py`).
    pub fn mean_iou_all_classes(&self) -> f64 {
        if self.num_classes == 0 {
            return 0.0;
        }
        let sum: f64 = (0..self.num_classes)
            .map(|c| self.iou(c).unwrap_or(0.0))
            .sum();
        sum / self.num_classes as f64
    }

    /// `TP / GT pixels` of class `c`, or `None` without ground-truth pixels.
    pub fn class_accuracy(&self, c: usize) -> Option<f64> {
        let gt = self.ground_truth_pixels(c);
        (gt > 0).then(|| self.true_positives(c) as f64 / gt as f64)
    }

    /// Mean of [`class_accuracy`](Self::class_accuracy) over the classes present in the ground
    /// truth; 0 for an empty matrix.
    pub fn mean_class_accuracy(&self) -> f64 {
        mean((0..self.num_classes).filter_map(|c| self.class_accuracy(c)))
    }

    /// Correct pixels / all non-ignored pixels; 0 for an empty matrix.
    pub fn pixel_accuracy(&self) -> f64 {
        let total = self.total_pixels();
        if total == 0 {
            return 0.0;
        }
        let correct: u64 = (0..self.num_classes).map(|c| self.true_positives(c)).sum();
        correct as f64 / total as f64
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

/// Host integer values in Burn's usual int dtypes, kept as they are (no widening copy).
enum HostInts {
    I32(Vec<i32>),
    I64(Vec<i64>),
}

fn host_ints(data: TensorData) -> HostInts {
    match data.dtype {
        DType::I32 => HostInts::I32(data.into_vec::<i32>().expect("i32 data")),
        DType::I64 => HostInts::I64(data.into_vec::<i64>().expect("i64 data")),
        _ => HostInts::I64(data.iter::<i64>().collect()),
    }
}

#[cfg(test)]
#[path = "confusion_tests.rs"]
mod tests;

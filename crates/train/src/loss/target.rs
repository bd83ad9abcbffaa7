//! Segmentation targets, validated once on the host and shared by every loss term.
//!
//! Targets are downloaded once (a cheap integer copy) so that an invalid class id becomes a
//! typed error instead of an out-of-range gather, and so that OHEM and the boundary-aware gating
//! can work on the host without further syncs.

use burn::tensor::{backend::Backend, Int, Tensor};

use super::error::LossError;
use super::precision::{download_i64, host_int};

/// Target class ids `[N, H, W]`, row-major, each a class in `0..num_classes` or the ignore index.
#[derive(Debug, Clone, PartialEq)]
pub struct PixelTargets {
    labels: Vec<i64>,
    shape: [usize; 3],
    num_classes: usize,
    ignore_index: i64,
}

impl PixelTargets {
    /// Downloads and validates `target` `[N, H, W]`.
    pub fn from_tensor<B: Backend>(
        target: Tensor<B, 3, Int>,
        num_classes: usize,
        ignore_index: i64,
    ) -> Result<Self, LossError> {
        let shape = target.dims();
        Self::new(download_i64(target), shape, num_classes, ignore_index)
    }

    /// Validates host labels of shape `[N, H, W]`.
    pub fn new(
        labels: Vec<i64>,
        shape: [usize; 3],
        num_classes: usize,
        ignore_index: i64,
    ) -> Result<Self, LossError> {
        if labels.len() != shape.iter().product::<usize>() {
            return Err(LossError::ShapeMismatch {
                what: "number of target values vs target shape",
                expected: shape.to_vec(),
                got: vec![labels.len()],
            });
        }
        let classes = num_classes as i64;
        let invalid = |v: i64| v != ignore_index && !(0..classes).contains(&v);
        if let Some(&value) = labels.iter().find(|&&v| invalid(v)) {
            let count = labels.iter().filter(|&&v| v == value).count();
            return Err(LossError::TargetOutOfRange {
                value,
                count,
                num_classes,
                ignore_index,
            });
        }
        Ok(Self {
            labels,
            shape,
            num_classes,
            ignore_index,
        })
    }

    /// The labels, row-major `[N, H, W]`.
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }

    /// `[N, H, W]`.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// Number of classes the labels were validated against.
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// The ignore index.
    pub fn ignore_index(&self) -> i64 {
        self.ignore_index
    }

    /// Number of pixels that are not ignored.
    pub fn num_valid(&self) -> usize {
        self.labels
            .iter()
            .filter(|&&v| v != self.ignore_index)
            .count()
    }

    /// The class of pixel `i`, or `None` when it is ignored.
    #[inline]
    pub(crate) fn class_at(&self, i: usize) -> Option<usize> {
        let v = self.labels[i];
        (v != self.ignore_index).then_some(v as usize)
    }

    /// The same targets with pixels where `keep(i)` is false set to the ignore index.
    pub(crate) fn retain(&self, mut keep: impl FnMut(usize) -> bool) -> Self {
        let labels = self
            .labels
            .iter()
            .enumerate()
            .map(|(i, &v)| if keep(i) { v } else { self.ignore_index })
            .collect();
        Self {
            labels,
            ..self.clone()
        }
    }

    /// Gather indices `[N, 1, H, W]` for the class dimension: the label, or 0 where ignored
    /// (those pixels get weight 0, exactly like the official `tmp[tmp == 255] = 0`).
    pub(crate) fn gather_index<B: Backend>(&self, device: &B::Device) -> Tensor<B, 4, Int> {
        let [n, h, w] = self.shape;
        let index = self
            .labels
            .iter()
            .map(|&v| if v == self.ignore_index { 0 } else { v })
            .collect();
        host_int(index, [n, 1, h, w], device)
    }

    /// Per-pixel weights `w[y]` (1 without class weights), 0 at ignored pixels.
    pub(crate) fn pixel_weights(&self, class_weights: Option<&[f32]>) -> Vec<f32> {
        (0..self.labels.len())
            .map(|i| match (self.class_at(i), class_weights) {
                (None, _) => 0.0,
                (Some(c), Some(w)) => w[c],
                (Some(_), None) => 1.0,
            })
            .collect()
    }
}

/// Checks that a class-weight vector has one entry per class.
pub(crate) fn check_class_weights(
    class_weights: Option<&[f32]>,
    num_classes: usize,
) -> Result<(), LossError> {
    match class_weights {
        Some(w) if w.len() != num_classes => Err(LossError::ClassWeightsLength {
            expected: num_classes,
            got: w.len(),
        }),
        _ => Ok(()),
    }
}

/// Checks that logits `[N, C, H, W]` and targets `[N, H, W]` agree.
pub(crate) fn check_logits_target(logits: [usize; 4], target: [usize; 3]) -> Result<(), LossError> {
    let [n, _, h, w] = logits;
    if [n, h, w] != target {
        return Err(LossError::ShapeMismatch {
            what: "logits [N, C, H, W] vs target [N, H, W]",
            expected: vec![n, h, w],
            got: target.to_vec(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_value_is_named_with_its_count() {
        let err = PixelTargets::new(vec![0, 19, 255, 19, 3, 3], [1, 2, 3], 19, 255).unwrap_err();
        assert_eq!(
            err,
            LossError::TargetOutOfRange {
                value: 19,
                count: 2,
                num_classes: 19,
                ignore_index: 255
            }
        );
        assert!(err.to_string().contains("target value 19"), "{err}");
        let err = PixelTargets::new(vec![-1, 0], [1, 1, 2], 19, 255).unwrap_err();
        assert!(matches!(err, LossError::TargetOutOfRange { value: -1, .. }));
    }

    #[test]
    fn weights_and_gather_index_zero_out_ignored_pixels() {
        let t = PixelTargets::new(vec![1, 255, 0, 2], [1, 2, 2], 3, 255).unwrap();
        assert_eq!(t.num_valid(), 3);
        assert_eq!(
            t.pixel_weights(Some(&[0.5, 2.0, 3.0])),
            vec![2.0, 0.0, 0.5, 3.0]
        );
        assert_eq!(t.pixel_weights(None), vec![1.0, 0.0, 1.0, 1.0]);
        let kept = t.retain(|i| i != 0);
        assert_eq!(kept.labels(), &[255, 255, 0, 2]);
    }
}

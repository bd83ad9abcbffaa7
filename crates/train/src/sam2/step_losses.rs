//! The loss terms of a SAM2 step as the engine reports them (run log, metrics files,
//! progress).

use crate::engine::LossTerms;

/// The loss terms of one micro-batch (summed over prediction steps, as SAM2 does).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sam2LossValues {
    /// `core_loss`: the weighted sum that is backpropagated.
    pub total: f64,
    pub mask: f64,
    pub dice: f64,
    pub iou: f64,
    pub class: f64,
}

/// A step's terms: the mean over its micro-batches that had objects, and the objects seen.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sam2StepLosses {
    /// `None` when no micro-batch of the step had an object (the step changed nothing).
    pub loss: Option<Sam2LossValues>,
    pub objects: usize,
    /// Micro-batches that contributed to `loss` (the mean's denominator).
    contributing: usize,
}

impl Sam2StepLosses {
    /// The terms of one micro-batch.
    pub fn of(loss: Option<Sam2LossValues>, objects: usize) -> Self {
        Self {
            loss,
            objects,
            contributing: usize::from(loss.is_some()),
        }
    }
}

impl LossTerms for Sam2StepLosses {
    const COLUMNS: &'static [&'static str] = &[
        "loss",
        "loss_mask",
        "loss_dice",
        "loss_iou",
        "loss_class",
        "objects",
    ];

    fn total(&self) -> f64 {
        self.loss.map_or(0.0, |l| l.total)
    }

    /// Objects add up; the terms average over the micro-batches that had objects (the
    /// gradient is each micro-batch's share, as the engine divides by the step's count).
    fn add_share(&mut self, other: &Self, _count: usize) {
        self.objects += other.objects;
        let Some(theirs) = other.loss else {
            return;
        };
        let n = self.contributing as f64;
        let m = other.contributing as f64;
        let mean = |a: f64, b: f64| (a * n + b * m) / (n + m);
        self.loss = Some(match self.loss {
            None => theirs,
            Some(ours) => Sam2LossValues {
                total: mean(ours.total, theirs.total),
                mask: mean(ours.mask, theirs.mask),
                dice: mean(ours.dice, theirs.dice),
                iou: mean(ours.iou, theirs.iou),
                class: mean(ours.class, theirs.class),
            },
        });
        self.contributing += other.contributing;
    }

    fn columns(&self) -> Vec<Option<f64>> {
        let l = self.loss;
        vec![
            l.map(|l| l.total),
            l.map(|l| l.mask),
            l.map(|l| l.dice),
            l.map(|l| l.iou),
            l.map(|l| l.class),
            Some(self.objects as f64),
        ]
    }

    fn describe(&self) -> String {
        let loss = match self.loss {
            Some(l) => format!(
                "loss {:.4} (mask {:.4} dice {:.4} iou {:.4} class {:.4})",
                l.total, l.mask, l.dice, l.iou, l.class
            ),
            None => "no object in this step".to_string(),
        };
        format!("{loss} {} objects", self.objects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(total: f64) -> Sam2LossValues {
        Sam2LossValues {
            total,
            mask: total / 2.0,
            ..Sam2LossValues::default()
        }
    }

    /// Micro-batches without objects count their objects (none) but not their terms.
    #[test]
    fn steps_average_the_micro_batches_that_had_objects() {
        let mut step = Sam2StepLosses::default();
        step.add_share(&Sam2StepLosses::of(Some(terms(1.0)), 3), 3);
        step.add_share(&Sam2StepLosses::of(None, 0), 3);
        step.add_share(&Sam2StepLosses::of(Some(terms(4.0)), 2), 3);
        assert_eq!(step.objects, 5);
        assert_eq!(step.loss.map(|l| l.total), Some(2.5));
        assert_eq!(step.loss.map(|l| l.mask), Some(1.25));
        let empty = Sam2StepLosses::of(None, 0);
        assert_eq!(empty.columns()[0], None);
        assert!(empty.describe().contains("no object"));
    }
}

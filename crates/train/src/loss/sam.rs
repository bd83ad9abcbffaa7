//! SAM2's training loss (`training/loss_fns.py`, `MultiStepMultiMasksAndIous`) with the
//! released weights: 20 · focal + 1 · dice + 1 · IoU-prediction + 1 · object-score.
//!
//! Every term is computed per object and divided by `num_objects` (all objects of the batch,
//! present or not). With several masks per object (multimask output), only the mask with the
//! lowest `20·focal + dice` takes the mask losses, while the IoU head is supervised on every
//! mask. Objects whose ground truth is empty get no mask or IoU loss; the object-score BCE
//! applies to all. Prediction steps (initial prompt and each correction click) add up.

use burn::tensor::{backend::Backend, Tensor};
use segburn_kernels::{mask_loss_sums, Focal};
use serde::{Deserialize, Serialize};

use super::error::LossError;

/// The SAM2 loss weights and switches; defaults are the released
/// `sam2.1_hiera_b+_MOSE_finetune.yaml` values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SamLossConfig {
    /// Weight of the sigmoid focal loss (`loss_mask`).
    pub weight_mask: f32,
    /// Weight of the dice loss.
    pub weight_dice: f32,
    /// Weight of the IoU-prediction loss.
    pub weight_iou: f32,
    /// Weight of the object-score loss (`loss_class`).
    pub weight_class: f32,
    /// α of the mask focal loss (negative: no α weighting).
    pub focal_alpha: f32,
    /// γ of the mask focal loss.
    pub focal_gamma: f32,
    /// α of the object-score focal loss; the released −1 makes it a plain BCE.
    pub focal_alpha_obj_score: f32,
    /// γ of the object-score focal loss; the released 0 makes it a plain BCE.
    pub focal_gamma_obj_score: f32,
    /// Supervise the IoU prediction of every mask (true) or only of the selected one.
    pub supervise_all_iou: bool,
    /// L1 IoU-prediction loss (true, released) or MSE.
    pub iou_use_l1_loss: bool,
    /// Train the object-score head; without it every object counts as present.
    pub pred_obj_scores: bool,
}

impl Default for SamLossConfig {
    fn default() -> Self {
        Self {
            weight_mask: 20.0,
            weight_dice: 1.0,
            weight_iou: 1.0,
            weight_class: 1.0,
            focal_alpha: 0.25,
            focal_gamma: 2.0,
            focal_alpha_obj_score: -1.0,
            focal_gamma_obj_score: 0.0,
            supervise_all_iou: true,
            iou_use_l1_loss: true,
            pred_obj_scores: true,
        }
    }
}

/// One prediction step of `N` objects with `M` masks each (M = 3 multimask, or 1).
#[derive(Debug, Clone)]
pub struct SamPrediction<B: Backend> {
    /// `[N, M, H, W]` mask logits at the target resolution (SAM2: upsampled to the image).
    pub masks: Tensor<B, 4>,
    /// `[N, M]` predicted IoUs.
    pub iou_pred: Tensor<B, 2>,
    /// `[N, 1]` object-score logits.
    pub object_score_logits: Tensor<B, 2>,
}

/// The four loss terms, each a `[1]` tensor, already divided by `num_objects`.
#[derive(Debug, Clone)]
pub struct SamLossTerms<B: Backend> {
    /// Sigmoid focal loss of the selected masks.
    pub loss_mask: Tensor<B, 1>,
    /// Dice loss of the selected masks.
    pub loss_dice: Tensor<B, 1>,
    /// IoU-prediction loss.
    pub loss_iou: Tensor<B, 1>,
    /// Object-score loss.
    pub loss_class: Tensor<B, 1>,
}

/// Term-wise sum (prediction steps add up).
impl<B: Backend> std::ops::Add for SamLossTerms<B> {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            loss_mask: self.loss_mask + other.loss_mask,
            loss_dice: self.loss_dice + other.loss_dice,
            loss_iou: self.loss_iou + other.loss_iou,
            loss_class: self.loss_class + other.loss_class,
        }
    }
}

impl<B: Backend> SamLossTerms<B> {
    /// The weighted sum that is backpropagated (`core_loss`).
    pub fn core_loss(&self, config: &SamLossConfig) -> Tensor<B, 1> {
        self.loss_mask.clone() * config.weight_mask
            + self.loss_dice.clone() * config.weight_dice
            + self.loss_iou.clone() * config.weight_iou
            + self.loss_class.clone() * config.weight_class
    }
}

/// The SAM2 multi-step, multi-mask loss.
#[derive(Debug, Clone, Default)]
pub struct SamLoss {
    /// Weights and switches.
    pub config: SamLossConfig,
}

impl SamLoss {
    /// A loss with the given configuration.
    pub fn new(config: SamLossConfig) -> Self {
        Self { config }
    }

    /// Sums [`step`](Self::step) over the prediction steps of one set of objects.
    ///
    /// `targets`: `[N, 1, H, W]` (or `[N, H, W]` reshaped by the caller) with values 0/1.
    /// Fails on an empty step list or mismatched shapes.
    pub fn forward<B: Backend>(
        &self,
        steps: &[SamPrediction<B>],
        targets: Tensor<B, 4>,
        num_objects: f32,
    ) -> Result<SamLossTerms<B>, LossError> {
        let mut total: Option<SamLossTerms<B>> = None;
        for step in steps {
            let terms = self.step(step, targets.clone(), num_objects)?;
            total = Some(match total {
                Some(sum) => sum + terms,
                None => terms,
            });
        }
        total.ok_or_else(|| LossError::InvalidConfig("no prediction step to supervise".into()))
    }

    /// The loss terms of one prediction step.
    ///
    /// * `targets`: `[N, 1, H, W]`, 1 inside the object; an all-zero row is an absent object.
    /// * `num_objects`: objects in the whole batch (across devices); values below 1 count as 1.
    pub fn step<B: Backend>(
        &self,
        prediction: &SamPrediction<B>,
        targets: Tensor<B, 4>,
        num_objects: f32,
    ) -> Result<SamLossTerms<B>, LossError> {
        let config = &self.config;
        let [n, m, h, w] = prediction.masks.dims();
        check_shape(
            "targets vs masks [N, 1, H, W]",
            &[n, 1, h, w],
            &targets.dims(),
        )?;
        check_shape(
            "iou_pred vs masks [N, M]",
            &[n, m],
            &prediction.iou_pred.dims(),
        )?;
        check_shape(
            "object_score_logits [N, 1]",
            &[n, 1],
            &prediction.object_score_logits.dims(),
        )?;
        let num_objects = num_objects.max(1.0);

        let pixels = h * w;
        let logits = prediction.masks.clone().reshape([n, m, pixels]);
        let targets = targets.reshape([n, pixels]);
        let focal = Focal {
            alpha: f64::from(config.focal_alpha),
            gamma: f64::from(config.focal_gamma),
        };
        // One pass over the masks for all three terms (`kernels::mask_loss_sums`).
        let sums = mask_loss_sums(logits, targets.clone(), focal);
        let sum = |k: usize| sums.clone().narrow(2, k, 1).reshape([n, m]);
        let focal = sum(0) / pixels as f64 / num_objects;
        // Dice: 1 − (2 Σ p t + 1) / (Σ p + Σ t + 1) per (object, mask).
        let dice = ((sum(1) * 2.0 + 1.0) / (sum(2) + sum(3) + 1.0)).neg() + 1.0;
        let dice = dice / num_objects;
        let iou = self.iou_loss(sum(4), sum(5), prediction.iou_pred.clone()) / num_objects;

        let (target_obj, loss_class) = if config.pred_obj_scores {
            let present = targets.greater_elem(0.0).any_dim(1).float();
            let focal = Focal {
                alpha: f64::from(config.focal_alpha_obj_score),
                gamma: f64::from(config.focal_gamma_obj_score),
            };
            // One "mask" of one pixel per object.
            let logits = prediction.object_score_logits.clone().reshape([n, 1, 1]);
            let class = mask_loss_sums(logits, present.clone(), focal)
                .narrow(2, 0, 1)
                .reshape([n, 1])
                .mean_dim(1)
                .sum()
                / num_objects;
            (present, class)
        } else {
            let device = focal.device();
            (Tensor::ones([n, 1], &device), Tensor::zeros([1], &device))
        };

        let (loss_mask, loss_dice, loss_iou) = if m > 1 {
            // Only the mask that fits best (by the weighted focal + dice) is trained.
            let combo = focal.clone() * config.weight_mask + dice.clone() * config.weight_dice;
            let best = combo.argmin(1);
            let iou = if config.supervise_all_iou {
                iou.mean_dim(1)
            } else {
                iou.gather(1, best.clone())
            };
            (focal.gather(1, best.clone()), dice.gather(1, best), iou)
        } else {
            (focal, dice, iou)
        };
        // No mask or IoU supervision for objects absent from the ground truth.
        Ok(SamLossTerms {
            loss_mask: (loss_mask * target_obj.clone()).sum(),
            loss_dice: (loss_dice * target_obj.clone()).sum(),
            loss_iou: (loss_iou * target_obj).sum(),
            loss_class,
        })
    }

    /// `|pred_iou − IoU(logits > 0, target > 0)|` (or squared): `[N, M]`, from the masks'
    /// intersection and union pixel counts. The actual IoU is a constant, so only the IoU
    /// head receives gradients.
    fn iou_loss<B: Backend>(
        &self,
        intersection: Tensor<B, 2>,
        union: Tensor<B, 2>,
        iou_pred: Tensor<B, 2>,
    ) -> Tensor<B, 2> {
        let actual = (intersection / union.clamp_min(1.0)).detach();
        let difference = iou_pred - actual;
        if self.config.iou_use_l1_loss {
            difference.abs()
        } else {
            difference.square()
        }
    }
}

fn check_shape(what: &'static str, expected: &[usize], got: &[usize]) -> Result<(), LossError> {
    if expected == got {
        Ok(())
    } else {
        Err(LossError::ShapeMismatch {
            what,
            expected: expected.to_vec(),
            got: got.to_vec(),
        })
    }
}

#[cfg(test)]
#[path = "sam_tests.rs"]
mod tests;

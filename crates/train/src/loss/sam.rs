//! SAM2's training loss (`training/loss_fns.py`, `MultiStepMultiMasksAndIous`) with the
//! released weights: 20 · focal + 1 · dice + 1 · IoU-prediction + 1 · object-score.
//!
//! Every term is computed per object and divided by `num_objects` (all objects of the batch,
//! present or not). With several masks per object (multimask output), only the mask with the
//! lowest `20·focal + dice` takes the mask losses, while the IoU head is supervised on every
//! mask. Objects whose ground truth is empty get no mask or IoU loss; the object-score BCE
//! applies to all. Prediction steps (initial prompt and each correction click) add up.

use burn::tensor::activation::sigmoid;
use burn::tensor::{backend::Backend, Tensor};
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

        let logits = prediction.masks.clone().reshape([n, m, h * w]);
        let targets = targets.reshape([n, 1, h * w]);
        // A real copy, not a broadcast view: Flex's element-wise ops on stride-0 operands are
        // several times slower, and every focal/dice/IoU op reads the targets.
        let expanded = targets.clone().repeat_dim(1, m);
        let focal = sigmoid_focal(
            logits.clone(),
            expanded.clone(),
            config.focal_alpha,
            config.focal_gamma,
        )
        .mean_dim(2)
        .reshape([n, m])
            / num_objects;
        let dice = dice(logits.clone(), expanded.clone()) / num_objects;
        let iou = self.iou_loss(logits, expanded, prediction.iou_pred.clone()) / num_objects;

        let (target_obj, loss_class) = if config.pred_obj_scores {
            let present = targets.greater_elem(0.0).any_dim(2).reshape([n, 1]).float();
            let class = sigmoid_focal(
                prediction.object_score_logits.clone().unsqueeze_dim(2),
                present.clone().unsqueeze_dim(2),
                config.focal_alpha_obj_score,
                config.focal_gamma_obj_score,
            )
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

    /// `|pred_iou − IoU(logits > 0, target > 0)|` (or squared): `[N, M]`. The actual IoU is a
    /// constant, so only the IoU head receives gradients.
    fn iou_loss<B: Backend>(
        &self,
        logits: Tensor<B, 3>,
        targets: Tensor<B, 3>,
        iou_pred: Tensor<B, 2>,
    ) -> Tensor<B, 2> {
        let [n, m, _] = logits.dims();
        let predicted = logits.greater_elem(0.0);
        let truth = targets.greater_elem(0.0);
        let intersection = predicted.clone().bool_and(truth.clone()).float().sum_dim(2);
        let union = predicted.bool_or(truth).float().sum_dim(2);
        let actual = (intersection / union.clamp_min(1.0)).reshape([n, m]);
        let difference = iou_pred - actual;
        if self.config.iou_use_l1_loss {
            difference.abs()
        } else {
            difference.square()
        }
    }
}

/// Element-wise sigmoid focal loss `BCE(x, t) · (1 − p_t)^γ · α_t` (α < 0: no α_t).
fn sigmoid_focal<B: Backend>(
    logits: Tensor<B, 3>,
    targets: Tensor<B, 3>,
    alpha: f32,
    gamma: f32,
) -> Tensor<B, 3> {
    let prob = sigmoid(logits.clone());
    // The overflow-free form of BCE-with-logits that PyTorch uses.
    let ce = logits.clone().clamp_min(0.0) - logits.clone() * targets.clone()
        + logits.abs().neg().exp().log1p();
    let mut loss = if gamma == 0.0 {
        // torch's `x ** 0` is 1 with a zero gradient; skip it rather than differentiate 0^0.
        ce
    } else {
        let p_t =
            prob.clone() * targets.clone() + (prob.neg() + 1.0) * (targets.clone().neg() + 1.0);
        ce * (p_t.neg() + 1.0).powf_scalar(gamma)
    };
    if alpha >= 0.0 {
        let alpha_t = targets.clone() * alpha + (targets.neg() + 1.0) * (1.0 - alpha);
        loss = loss * alpha_t;
    }
    loss
}

/// `1 − (2 Σ p t + 1) / (Σ p + Σ t + 1)` per (object, mask): `[N, M, HW] -> [N, M]`.
fn dice<B: Backend>(logits: Tensor<B, 3>, targets: Tensor<B, 3>) -> Tensor<B, 2> {
    let [n, m, _] = logits.dims();
    let prob = sigmoid(logits);
    let numerator = (prob.clone() * targets.clone()).sum_dim(2) * 2.0;
    let denominator = prob.sum_dim(2) + targets.sum_dim(2);
    ((numerator + 1.0) / (denominator + 1.0))
        .neg()
        .reshape([n, m])
        + 1.0
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
mod tests {
    use std::collections::BTreeMap;

    use burn::backend::{flex::FlexDevice, Autodiff, Flex};
    use burn::module::{Module, ModuleVisitor, Param};
    use burn::tensor::{backend::Backend, Tensor};
    use segburn_models::fixtures::{fixtures_dir, max_abs_diff, rel_l2, tensor_values, Fixture};
    use segburn_models::sam2::{
        import, upscale_mask_logits, HighResFeatures, MaskDecoderConfig, MaskDecoderInput,
        PointPrompts, PromptEncoderConfig, Sam2, Sam2Config,
    };

    use super::*;

    fn fixture(name: &str) -> Fixture {
        Fixture::load(&format!("sam2/{name}")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
        tensor_values(t)[0]
    }

    fn assert_rel(name: &str, ours: f64, reference: f64, tolerance: f64) -> f64 {
        let rel = (ours - reference).abs() / reference.abs().max(1e-12);
        assert!(
            rel <= tolerance,
            "{name}: ours {ours} vs reference {reference} (rel {rel:e})"
        );
        rel
    }

    /// `targets` [N, H, W] u8 -> [N, 1, H, W] f32.
    fn targets<B: Backend>(f: &Fixture, device: &B::Device) -> Tensor<B, 4> {
        let t: Tensor<B, 3> = f.float("targets", device).expect("targets");
        t.unsqueeze_dim(1)
    }

    fn check_terms(prefix: &str, masks: &str, ious: &str, objects: &str) {
        let device = FlexDevice;
        let f = fixture("loss_case.safetensors");
        let prediction = SamPrediction::<Flex> {
            masks: f.float(masks, &device).expect(masks),
            iou_pred: f.float(ious, &device).expect(ious),
            object_score_logits: f.float(objects, &device).expect(objects),
        };
        let loss = SamLoss::default();
        let terms = loss
            .step(&prediction, targets(&f, &device), 4.0)
            .expect("loss");
        let core = terms.core_loss(&loss.config);
        let mut line = Vec::new();
        for (name, ours) in [
            ("loss_mask", terms.loss_mask),
            ("loss_dice", terms.loss_dice),
            ("loss_iou", terms.loss_iou),
            ("loss_class", terms.loss_class),
            ("core_loss", core),
        ] {
            let key = format!("{prefix}{name}");
            let reference = f.values_f64(&key).expect("reference")[0];
            let rel = assert_rel(&key, scalar(ours), reference, 1e-5);
            line.push(format!("{key} {rel:.1e}"));
        }
        println!("rel errors: {}", line.join(", "));
    }

    #[test]
    fn multimask_loss_terms_match_the_official_loss() {
        check_terms("", "high_res_multimasks", "ious", "object_score_logits");
    }

    #[test]
    fn single_mask_loss_terms_match_the_official_loss() {
        check_terms(
            "sm_",
            "sm_high_res_masks",
            "sm_ious",
            "sm_object_score_logits",
        );
    }

    #[test]
    fn absent_objects_get_only_the_object_score_loss() {
        let device = FlexDevice;
        let prediction = SamPrediction::<Flex> {
            masks: Tensor::random([2, 3, 8, 8], burn::tensor::Distribution::Default, &device),
            iou_pred: Tensor::full([2, 3], 0.5, &device),
            object_score_logits: Tensor::zeros([2, 1], &device),
        };
        let terms = SamLoss::default()
            .step(&prediction, Tensor::zeros([2, 1, 8, 8], &device), 2.0)
            .expect("loss");
        assert_eq!(scalar(terms.loss_mask), 0.0);
        assert_eq!(scalar(terms.loss_dice), 0.0);
        assert_eq!(scalar(terms.loss_iou), 0.0);
        // BCE(0, 0) = ln 2 per object, summed over 2 objects and divided by num_objects = 2.
        let class = scalar(terms.loss_class);
        assert!((class - std::f64::consts::LN_2).abs() < 1e-6, "{class}");
    }

    #[test]
    fn steps_add_up_and_bad_shapes_are_errors() {
        let device = FlexDevice;
        let f = fixture("loss_case.safetensors");
        let prediction = SamPrediction::<Flex> {
            masks: f.float("sm_high_res_masks", &device).expect("masks"),
            iou_pred: f.float("sm_ious", &device).expect("ious"),
            object_score_logits: f.float("sm_object_score_logits", &device).expect("obj"),
        };
        let loss = SamLoss::default();
        let one = loss
            .step(&prediction, targets(&f, &device), 4.0)
            .expect("one");
        let two = loss
            .forward(
                &[prediction.clone(), prediction.clone()],
                targets(&f, &device),
                4.0,
            )
            .expect("two");
        let (one, two) = (
            scalar(one.core_loss(&loss.config)),
            scalar(two.core_loss(&loss.config)),
        );
        assert!((two - 2.0 * one).abs() < 1e-5 * one, "{two} vs 2 × {one}");

        let small_targets = Tensor::<Flex, 4>::zeros([4, 1, 64, 64], &device);
        let error = loss.step(&prediction, small_targets, 4.0).unwrap_err();
        assert!(matches!(error, LossError::ShapeMismatch { .. }), "{error}");
        assert!(loss
            .forward::<Flex>(&[], targets(&f, &device), 4.0)
            .is_err());
    }

    type A = Autodiff<Flex>;

    /// Collects the gradient of every parameter under its official key.
    struct GradCollector<'a> {
        path: Vec<String>,
        grads: &'a <A as burn::tensor::backend::AutodiffBackend>::Gradients,
        out: BTreeMap<String, Vec<f64>>,
    }

    impl ModuleVisitor<A> for GradCollector<'_> {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }

        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }

        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
            if let Some(grad) = param.grad(self.grads) {
                self.out.insert(self.path.join("."), tensor_values(grad));
            }
        }
    }

    #[test]
    fn batch4_training_gradients_match_the_official_step() {
        let device = FlexDevice;
        let dir = fixtures_dir().join("sam2");
        let config = Sam2Config::new(
            PromptEncoderConfig::new([16, 16], [256, 256]),
            MaskDecoderConfig::new(),
        );
        let model: Sam2<A> = config.init(&device);
        let (prompt_encoder, _) = import::load_prompt_encoder(
            model.sam_prompt_encoder,
            &dir.join("prompt_encoder.safetensors"),
            true,
        )
        .expect("prompt encoder");
        let (mask_decoder, _) = import::load_mask_decoder(
            model.sam_mask_decoder,
            &dir.join("mask_decoder.safetensors"),
            true,
        )
        .expect("mask decoder");
        let model = Sam2 {
            image_encoder: None,
            no_mem_embed: None,
            sam_prompt_encoder: prompt_encoder,
            sam_mask_decoder: mask_decoder,
        };

        let f = fixture("loss_case.safetensors");
        let labels: Tensor<A, 2> = f.float("in_point_labels", &device).expect("labels");
        let points = PointPrompts {
            coords: f.float("in_point_coords", &device).expect("coords"),
            labels: labels.int(),
        };
        let prompts = model
            .sam_prompt_encoder
            .forward(
                Some(&points),
                Some(f.float("in_boxes", &device).expect("boxes")),
                None,
            )
            .expect("prompts");
        let input = MaskDecoderInput {
            image_embeddings: f.float("in_image_embeddings", &device).expect("emb"),
            image_pe: model.sam_prompt_encoder.get_dense_pe(),
            sparse_prompt_embeddings: prompts.sparse,
            dense_prompt_embeddings: prompts.dense,
            high_res_features: Some(HighResFeatures {
                feat_s0: f.float("in_feat_s0", &device).expect("feat_s0"),
                feat_s1: f.float("in_feat_s1", &device).expect("feat_s1"),
            }),
        };
        let output = model
            .sam_mask_decoder
            .forward(input, true)
            .expect("decoder");
        let low_res = max_abs_diff(
            &tensor_values(output.masks.clone()),
            &f.values_f64("low_res_multimasks").expect("low res"),
        );
        assert!(low_res <= 1e-4, "low-res masks: {low_res:e}");

        let loss = SamLoss::default();
        let prediction = SamPrediction {
            masks: upscale_mask_logits(output.masks, [256, 256]),
            iou_pred: output.iou_pred,
            object_score_logits: output.object_score_logits,
        };
        let terms = loss
            .step(&prediction, targets(&f, &device), 4.0)
            .expect("loss");
        let core = terms.core_loss(&loss.config);
        let reference = f.values_f64("core_loss").expect("core")[0];
        assert_rel("core_loss", scalar(core.clone()), reference, 1e-5);

        let grads = core.backward();
        let mut collector = GradCollector {
            path: Vec::new(),
            grads: &grads,
            out: BTreeMap::new(),
        };
        model.visit(&mut collector);
        let ours = collector.out;
        let reference = fixture("grads_batch4.safetensors");
        assert_eq!(reference.tensors().len(), 133);
        let (mut worst, mut worst_key, mut worst_bias) = (0.0f64, String::new(), 0.0f64);
        for key in reference.tensors().keys() {
            let expected = reference.values_f64(key).expect("grad");
            // Parameters that only enter through a `where` with no selected row get no
            // gradient here, as torch gives them an all-zero one.
            let got = ours
                .get(key)
                .cloned()
                .unwrap_or_else(|| vec![0.0; expected.len()]);
            if key.ends_with("k_proj.bias") {
                // Mathematically zero (softmax is shift-invariant per query): compare absolutely.
                let error = max_abs_diff(&got, &expected);
                worst_bias = worst_bias.max(error);
                assert!(error <= 1e-6, "{key}: max abs {error:e}");
                continue;
            }
            let norm: f64 = expected.iter().map(|v| v * v).sum::<f64>().sqrt();
            let error = if norm == 0.0 {
                max_abs_diff(&got, &expected)
            } else {
                rel_l2(&got, &expected)
            };
            if error > worst {
                (worst, worst_key) = (error, key.clone());
            }
            assert!(error <= 1e-3, "{key}: rel-L2 {error:e}");
        }
        // No parameter outside the reference set may receive a gradient (conv_s0/s1, the
        // mask-prompt convs and the position-encoding buffer).
        let extra: Vec<_> = ours
            .keys()
            .filter(|k| !reference.tensors().contains_key(*k))
            .collect();
        assert!(extra.is_empty(), "unexpected gradients: {extra:?}");
        println!(
            "low-res max abs {low_res:.2e}; worst grad rel-L2 {worst:.2e} ({worst_key}); \
             k_proj.bias max abs {worst_bias:.2e}"
        );
    }
}

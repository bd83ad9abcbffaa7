//! Tests of the SAM2 loss against the official fixtures.

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::{backend::Backend, Tensor};
use segburn_models::fixtures::{max_abs_diff, rel_l2, tensor_values, Fixture};
use segburn_models::sam2::upscale_mask_logits;

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

/// A large reference tensor stored as a strided sample of its flattened values
/// (`sample.<key>` at `index.<key>`) plus `sum.<key>` and `sumsq.<key>` (f64).
struct SampledReference {
    index: Vec<usize>,
    sample: Vec<f64>,
    sum: f64,
    sumsq: f64,
}

impl SampledReference {
    fn read(f: &Fixture, key: &str) -> Self {
        let get = |part: &str| {
            f.values_f64(&format!("{part}.{key}"))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        Self {
            index: get("index").iter().map(|&i| i as usize).collect(),
            sample: get("sample"),
            sum: get("sum")[0],
            sumsq: get("sumsq")[0],
        }
    }

    /// The number of values (the sample always ends at the last one).
    fn len(&self) -> usize {
        self.index.last().map_or(0, |i| i + 1)
    }

    fn pick(&self, values: &[f64]) -> Vec<f64> {
        assert_eq!(values.len(), self.len(), "sampled tensor length");
        self.index.iter().map(|&i| values[i]).collect()
    }

    fn sums(&self, values: &[f64]) -> (f64, f64) {
        (values.iter().sum(), values.iter().map(|v| v * v).sum())
    }

    /// The error of `values` against the reference at the old whole-tensor tolerance `tol`:
    /// rel-L2 over the sample ≤ tol, plus the two sums within what rel-L2 ≤ tol over the whole
    /// tensor implies (|‖a‖ − ‖b‖| ≤ ‖a − b‖, |Σa − Σb| ≤ √n ‖a − b‖). A zero reference is
    /// compared absolutely (max abs over the sample, RMS over the whole). Returns the sample's
    /// error; panics naming `key` on failure.
    fn check(&self, key: &str, values: &[f64], tol: f64) -> f64 {
        let sample = self.pick(values);
        let (sum, sumsq) = self.sums(values);
        let n = values.len() as f64;
        if self.sumsq == 0.0 {
            let error = max_abs_diff(&sample, &self.sample);
            assert!(error <= tol, "{key}: sampled max abs {error:e}");
            assert!(
                (sumsq / n).sqrt() <= tol,
                "{key}: RMS {}",
                (sumsq / n).sqrt()
            );
            return error;
        }
        let error = rel_l2(&sample, &self.sample);
        assert!(error <= tol, "{key}: sampled rel-L2 {error:e}");
        let norm = self.sumsq.sqrt();
        let norm_error = (sumsq.sqrt() - norm).abs() / norm;
        assert!(norm_error <= tol, "{key}: L2 norm rel {norm_error:e}");
        let sum_error = (sum - self.sum).abs() / (n.sqrt() * norm);
        assert!(sum_error <= tol, "{key}: sum {sum} vs {}", self.sum);
        error
    }
}

/// `targets` [N, H, W] u8 -> [N, 1, H, W] f32.
fn targets<B: Backend>(f: &Fixture, device: &B::Device) -> Tensor<B, 4> {
    let t: Tensor<B, 3> = f.float("targets", device).expect("targets");
    t.unsqueeze_dim(1)
}

/// The 256×256 masks the official loss saw: the stored 64×64 masks upscaled (bilinear,
/// `align_corners=False`, as SAM2Base does), checked against the stored sample and sums of the
/// official upscaled masks (`sample.<high>`, `index.<high>`, `sum.<high>`, `sumsq.<high>`).
fn high_res_masks<B: Backend>(
    f: &Fixture,
    low: &str,
    high: &str,
    device: &B::Device,
) -> Tensor<B, 4> {
    let masks = upscale_mask_logits(f.float(low, device).expect(low), [256, 256]);
    let values = tensor_values(masks.clone());
    let sums = SampledReference::read(f, high);
    let error = max_abs_diff(&sums.pick(&values), &sums.sample);
    assert!(error <= 1e-5, "{high}: sampled max abs {error:e}");
    let (sum, sumsq) = sums.sums(&values);
    assert_rel(&format!("sumsq.{high}"), sumsq, sums.sumsq, 1e-6);
    // |Σ ours − Σ ref| ≤ √n · ‖ours − ref‖: scale the sum's tolerance by √n · ‖ref‖.
    let bound = 1e-6 * (values.len() as f64 * sums.sumsq).sqrt();
    assert!(
        (sum - sums.sum).abs() <= bound,
        "sum.{high}: {sum} vs {}",
        sums.sum
    );
    masks
}

fn check_terms(prefix: &str, masks: &str, ious: &str, objects: &str) {
    let device = FlexDevice;
    let f = fixture("loss_case.safetensors");
    let high = masks.replace("low_res", "high_res");
    let prediction = SamPrediction::<Flex> {
        masks: high_res_masks(&f, masks, &high, &device),
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
    check_terms("", "low_res_multimasks", "ious", "object_score_logits");
}

#[test]
fn single_mask_loss_terms_match_the_official_loss() {
    check_terms(
        "sm_",
        "sm_low_res_masks",
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
        masks: high_res_masks(&f, "sm_low_res_masks", "sm_high_res_masks", &device),
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

#[path = "sam_batch4_tests.rs"]
mod batch4;

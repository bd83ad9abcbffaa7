//! Tests of the SAM2 loss against the official fixtures.

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

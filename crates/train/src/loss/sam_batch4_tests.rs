//! The batch-4 training step of the SAM2 heads against the official one: low-res masks,
//! `core_loss` and the gradient of every trained parameter (fixtures `sam2/loss_case`,
//! `sam2/grads_batch4`, inputs derived from `sam2/inputs`).

use crate::compute_threads::on_compute_pool;
use std::collections::BTreeMap;

use burn::backend::{flex::FlexDevice, Autodiff, Flex};
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use segburn_models::fixtures::{fixture_path, max_abs_diff, rel_l2, tensor_values};
use segburn_models::sam2::{
    import, upscale_mask_logits, HighResFeatures, MaskDecoderConfig, MaskDecoderInput,
    PointPrompts, PromptEncoderConfig, Sam2, Sam2Config,
};
use segburn_models::weights::ParamPath;

use super::*;

type A = Autodiff<Flex>;

/// Collects the gradient of every parameter under its official key.
struct GradCollector<'a> {
    path: ParamPath,
    grads: &'a <A as burn::tensor::backend::AutodiffBackend>::Gradients,
    out: BTreeMap<String, Vec<f64>>,
}

impl ModuleVisitor<A> for GradCollector<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<A, D>>) {
        if let Some(grad) = param.grad(self.grads) {
            self.out.insert(self.path.dotted(), tensor_values(grad));
        }
    }
}

/// Row `r` of the batch-4 case: the batch-1 input rotated left along W by 3·r columns per 16
/// (`rotate_left` in `scripts/fixtures/sam2_heads_cases/inputs.py`), rows stacked on the batch axis.
fn batch4_from_batch1(x: Tensor<A, 4>) -> Tensor<A, 4> {
    let width = x.dims()[3];
    let rows = (0..4)
        .map(|r| {
            let s = 3 * r * width / 16;
            if s == 0 {
                x.clone()
            } else {
                Tensor::cat(
                    vec![x.clone().narrow(3, s, width - s), x.clone().narrow(3, 0, s)],
                    3,
                )
            }
        })
        .collect();
    Tensor::cat(rows, 0)
}

fn heads_with_fixture_weights(device: &FlexDevice) -> Sam2<A> {
    let config = Sam2Config::new(
        PromptEncoderConfig::new([16, 16], [256, 256]),
        MaskDecoderConfig::new(),
    );
    let model: Sam2<A> = config.init(device);
    let path = |name: &str| fixture_path(&format!("sam2/{name}")).unwrap_or_else(|e| panic!("{e}"));
    let (prompt_encoder, _) = import::load_prompt_encoder(
        model.sam_prompt_encoder,
        &path("prompt_encoder.safetensors"),
        true,
    )
    .expect("prompt encoder");
    let (mask_decoder, _) = import::load_mask_decoder(
        model.sam_mask_decoder,
        &path("mask_decoder.safetensors"),
        true,
    )
    .expect("mask decoder");
    Sam2::from_heads(prompt_encoder, mask_decoder)
}

#[test]
fn batch4_training_gradients_match_the_official_step() {
    let device = FlexDevice;
    let model = heads_with_fixture_weights(&device);
    let f = fixture("loss_case.safetensors");
    let batch1 = fixture("inputs.safetensors");
    let image = |key: &str| batch4_from_batch1(batch1.float(key, &device).expect(key));
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
        image_embeddings: image("image_embeddings"),
        image_pe: model.sam_prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings: prompts.sparse,
        dense_prompt_embeddings: prompts.dense,
        high_res_features: Some(HighResFeatures {
            feat_s0: image("feat_s0"),
            feat_s1: image("feat_s1"),
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

    let grads = on_compute_pool(|| core.backward());
    let mut collector = GradCollector {
        path: ParamPath::new(),
        grads: &grads,
        out: BTreeMap::new(),
    };
    model.visit(&mut collector);
    let ours = collector.out;
    let reference = fixture("grads_batch4.safetensors");
    // Small gradients are stored whole under their keys, large ones as `sample.<key>` & co.
    let sampled: Vec<String> = reference
        .tensors()
        .keys()
        .filter_map(|k| k.strip_prefix("sample.").map(str::to_string))
        .collect();
    let whole: Vec<String> = reference
        .tensors()
        .keys()
        .filter(|k| {
            !["sample.", "index.", "sum.", "sumsq."]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .cloned()
        .collect();
    assert_eq!(whole.len() + sampled.len(), 133);
    let (mut worst, mut worst_key, mut worst_bias) = (0.0f64, String::new(), 0.0f64);
    let mut note = |error: f64, key: &str| {
        if error > worst {
            (worst, worst_key) = (error, key.to_string());
        }
    };
    for key in &whole {
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
        note(error, key);
        assert!(error <= 1e-3, "{key}: rel-L2 {error:e}");
    }
    for key in &sampled {
        let sample = SampledReference::read(&reference, key);
        let got = ours
            .get(key)
            .cloned()
            .unwrap_or_else(|| vec![0.0; sample.len()]);
        note(sample.check(key, &got, 1e-3), key);
    }
    // No parameter outside the reference set may receive a gradient (conv_s0/s1, the
    // mask-prompt convs and the position-encoding buffer).
    let extra: Vec<_> = ours
        .keys()
        .filter(|k| !whole.contains(k) && !sampled.contains(k))
        .collect();
    assert!(extra.is_empty(), "unexpected gradients: {extra:?}");
    println!(
        "low-res max abs {low_res:.2e}; worst grad rel-L2 {worst:.2e} ({worst_key}); \
         k_proj.bias max abs {worst_bias:.2e}"
    );
}

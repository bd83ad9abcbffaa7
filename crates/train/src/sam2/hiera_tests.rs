//! Fine-tuning SAM 2.1 with the Hiera encoder, on the reduced model of the fixtures
//! (`fixtures/sam2_hiera/`, official key names) and the bundled sample: frozen and trainable
//! encoders, layer-wise LR decay, exact resume with stochastic depth, `--init-from` official
//! files, mixed precision, and cached embeddings of real Hiera features.

use crate::compute_threads::on_compute_pool;
use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, Flex};
use burn::optim::GradientsParams;
use burn::tensor::{Tensor, TensorData};
use segburn_data::objects::ObjectDataset;
use segburn_models::fixtures::{fixture_path, gradients_by_key, tensor_values};
use segburn_models::sam2::import::{self, is_video_memory_key};
use segburn_models::sam2::Sam2Error;
use segburn_models::tensor_file::{read_safetensors, NamedTensors};
use segburn_models::weights::{dotted_path, WeightsError};

use super::embeddings::read_embeddings;
use super::encoder_config::reduced_fixture_encoder;
use super::encoder_lr::EncoderLrScales;
use super::tests::{assert_same_run, tiny_setup, write_val_embeddings};
use super::*;
use crate::mixed_precision::Precision;
use crate::optim::{list_params, OptimizerConfig, OptimizerSet, SgdSettings};

type A = Autodiff<Flex>;

/// A file of `tests/fixtures/sam2_hiera/` (`model.safetensors`: the formula weights of its
/// `model.keys.txt`, built on first use).
fn fixture(name: &str) -> PathBuf {
    fixture_path(&format!("sam2_hiera/{name}")).unwrap_or_else(|e| panic!("{e}"))
}

/// The reduced SAM 2.1 model (heads at d = 64 with the default 8 heads and MLP 2048) at 128 px,
/// one image of two objects per step, one correction click.
fn hiera_setup(run_dir: &Path, max_steps: u64) -> Sam2Setup {
    let mut setup = tiny_setup(run_dir, max_steps);
    setup.model = Sam2ModelConfig {
        image_size: 128,
        image_encoder: reduced_fixture_encoder(0.0),
        transformer_dim: 64,
        ..Sam2ModelConfig::default()
    };
    setup.data.batch_size = 1;
    setup.data.objects_per_image = 2;
    setup.prompts.correction_steps = 1;
    setup.train.lr = 1e-3;
    setup
}

/// A trainer started from the fixture weights (strictly, as `--init-from` does).
fn trainer_from_fixture(setup: Sam2Setup) -> Sam2Trainer<A> {
    let mut trainer = Sam2Trainer::<A>::new(setup, Default::default()).expect("trainer");
    trainer
        .init_weights_from(&fixture("model.safetensors"))
        .expect("the fixture loads strictly");
    trainer
}

fn quiet(_: &Sam2Event) {}

/// Keys under `prefix` whose bytes differ between two exports.
fn changed(before: &NamedTensors, after: &NamedTensors, prefix: &str) -> (usize, usize) {
    let keys: Vec<&String> = before.keys().filter(|k| k.starts_with(prefix)).collect();
    let moved = keys
        .iter()
        .filter(|k| before[**k].as_bytes() != after[**k].as_bytes())
        .count();
    (moved, keys.len())
}

#[test]
fn a_frozen_encoder_stays_bit_exact_and_a_trainable_one_moves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut setup = hiera_setup(&dir.path().join("frozen"), 2);
    setup.model.freeze_image_encoder = true;
    let mut frozen = trainer_from_fixture(setup.clone());
    assert!(frozen
        .trained_params()
        .iter()
        .all(|p| !p.key.starts_with("image_encoder.")));
    let before = import::export(frozen.model());
    frozen.run(&mut quiet).expect("frozen steps");
    let after = import::export(frozen.model());
    let (moved, total) = changed(&before, &after, "image_encoder.");
    assert!(
        moved == 0 && total > 90,
        "{moved} of {total} encoder tensors changed"
    );
    // The heads' part of the image path still trains: it runs with autodiff after the
    // encoder's (constant) levels.
    for key in [
        "no_mem_embed",
        "sam_mask_decoder.conv_s0.weight",
        "sam_mask_decoder.conv_s1.weight",
    ] {
        assert_ne!(before[key].as_bytes(), after[key].as_bytes(), "{key}");
    }
    drop(frozen);

    setup.model.freeze_image_encoder = false;
    setup.model.image_encoder = reduced_fixture_encoder(0.1);
    setup.model.image_encoder_lr_mult = 0.6;
    setup.model.image_encoder_layer_decay = Some(0.9);
    setup.train.run_dir = dir.path().join("trainable");
    let mut trainable = trainer_from_fixture(setup);
    trainable.run(&mut quiet).expect("trainable steps");
    let after = import::export(trainable.model());
    let (moved, total) = changed(&before, &after, "image_encoder.");
    println!("trainable encoder: {moved} of {total} tensors changed");
    assert!(moved > total * 9 / 10, "{moved} of {total}");
}

#[test]
fn layer_decay_scales_each_update_by_its_block() {
    // One SGD step without momentum or decay: the update of every parameter is
    // lr × scale × gradient, scale = image_encoder_lr_mult × decay^(L − layer) on the trunk.
    let mut setup = hiera_setup(Path::new("unused"), 1);
    setup.model.image_encoder_lr_mult = 0.5;
    setup.model.image_encoder_layer_decay = Some(0.8);
    let train = Sam2TrainConfig {
        optimizer: OptimizerConfig::Sgd(SgdSettings {
            momentum: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }),
        ..setup.train.clone()
    };
    let scales = EncoderLrScales::new(&setup.model).expect("scales");
    let device = Default::default();
    let model = setup.model.sam2().init::<A>(&device);
    let params = list_params(&model, &dotted_path);
    let mut optimizer = OptimizerSet::<_, A>::with_lr_scales(
        &train.optimizer,
        &train.param_groups,
        &params,
        &|p| scales.scale(&p.key),
    );
    let images = Tensor::<A, 4>::random(
        [1, 3, 128, 128],
        burn::tensor::Distribution::Normal(0.0, 1.0),
        &device,
    );
    let features = model.forward_image(images).expect("forward");
    let high_res = features.high_res.expect("high-res features");
    let loss = features.image_embed.powi_scalar(2).mean()
        + high_res.feat_s0.mean()
        + high_res.feat_s1.powi_scalar(2).mean();
    let raw = on_compute_pool(|| loss.backward());
    // (key, expected scale): L = 7 blocks + 1.
    let cases = [
        (
            "image_encoder.trunk.patch_embed.proj.weight",
            0.5 * 0.8f64.powi(8),
        ),
        (
            "image_encoder.trunk.blocks.0.attn.qkv.weight",
            0.5 * 0.8f64.powi(7),
        ),
        (
            "image_encoder.trunk.blocks.3.proj.weight",
            0.5 * 0.8f64.powi(4),
        ),
        (
            "image_encoder.trunk.blocks.6.mlp.layers.1.weight",
            0.5 * 0.8,
        ),
        ("image_encoder.trunk.pos_embed", 0.5),
        ("image_encoder.neck.convs.3.conv.weight", 0.5),
        ("sam_mask_decoder.conv_s0.weight", 1.0),
    ];
    let keys: Vec<String> = cases.iter().map(|(k, _)| k.to_string()).collect();
    let grads_of = gradients_by_key::<A, _>(&model, &raw, &keys, dotted_path);
    assert_eq!(grads_of.len(), keys.len(), "every case has a gradient");
    let before = import::export(&model);
    let lr = 0.5;
    let grads = GradientsParams::from_grads(raw, &model);
    let model = optimizer.step(lr, model, grads);
    let after = import::export(&model);
    for (key, scale) in cases {
        let values = |t: &TensorData| -> Vec<f64> { t.iter::<f64>().collect() };
        let (w0, w1, g) = (values(&before[key]), values(&after[key]), &grads_of[key]);
        let expected: Vec<f64> = g.iter().map(|g| lr * scale * g).collect();
        let update: Vec<f64> = w0.iter().zip(&w1).map(|(a, b)| a - b).collect();
        let error = segburn_models::fixtures::max_abs_diff(&update, &expected);
        let size = segburn_models::fixtures::max_abs(&expected);
        // The f32 rounding of the weights themselves.
        let rounding = 2.0 * f64::from(f32::EPSILON) * segburn_models::fixtures::max_abs(&w0);
        println!("{key}: scale {scale:.5}, max |update − lr·scale·grad| {error:.2e} of {size:.2e}");
        assert!(size > 0.0, "{key}: no gradient");
        assert!(
            error <= 1e-3 * size + rounding,
            "{key}: {error:.3e} vs {size:.3e}"
        );
    }
}

#[test]
fn a_hiera_run_with_layer_decay_and_drop_path_resumes_bit_for_bit() {
    let straight_dir = tempfile::tempdir().expect("tempdir");
    let resumed_dir = tempfile::tempdir().expect("tempdir");
    let setup = |dir: &Path| {
        let mut setup = hiera_setup(dir, 4);
        setup.model.image_encoder = reduced_fixture_encoder(0.3);
        setup.model.image_encoder_lr_mult = 0.6;
        setup.model.image_encoder_layer_decay = Some(0.9);
        setup.train.checkpoint_every_steps = Some(2);
        setup
    };
    let mut straight = trainer_from_fixture(setup(straight_dir.path()));
    let initial = import::export(straight.model());
    straight.run(&mut quiet).expect("4 steps");
    let middle = straight.checkpoint_dir().file_for_step(2);
    assert!(middle.is_file(), "{}", middle.display());

    let mut resumed =
        Sam2Trainer::<A>::new(setup(resumed_dir.path()), Default::default()).expect("trainer");
    resumed.resume(&middle).expect("resume at step 2");
    assert_eq!(resumed.state().step, 2);
    resumed.run(&mut quiet).expect("2 more steps");

    let a = assert_same_run(&straight, &resumed);
    // The encoder trained (the comparison is not vacuous).
    let (moved, total) = changed(&initial, &a, "image_encoder.trunk.");
    assert!(
        moved > total / 2,
        "{moved} of {total} trunk tensors changed"
    );
}

#[test]
fn init_from_official_files_is_strict_for_hiera() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut trainer =
        Sam2Trainer::<A>::new(hiera_setup(dir.path(), 1), Default::default()).expect("trainer");
    // The whole reduced model under official keys, video-memory modules included.
    let path = fixture("model.safetensors");
    let file = read_safetensors(&path).expect("fixture");
    let report = trainer.init_weights_from(&path).expect("strict load");
    let video = file.keys().filter(|k| is_video_memory_key(k)).count();
    assert!(video > 0);
    assert_eq!(report.not_used.len(), video, "{report}");
    assert!(
        report.missing.is_empty() && report.unexpected.is_empty(),
        "{report}"
    );
    let loaded = import::export(trainer.model());
    assert_eq!(loaded.len() + video, file.len());
    for (key, value) in &loaded {
        assert_eq!(value.as_bytes(), file[key].as_bytes(), "{key}");
    }

    // The official `{"model": …}` container with only 13 tensors: a strict load names what
    // is missing, and the trainer keeps a usable model.
    let subset = fixture("model_subset_official_format.pt");
    let error = trainer.init_weights_from(&subset).expect_err("incomplete");
    let message = error.to_string();
    assert!(
        message.contains("model_subset_official_format.pt"),
        "{message}"
    );
    let TrainError::Sam2(Sam2Error::Weights(WeightsError::Strict { report, .. })) = &error else {
        panic!("not a strict-load error: {message}");
    };
    assert_eq!(report.loaded.len(), 13, "{report}");
    assert_eq!(report.missing.len() + 13, loaded.len(), "{report}");
    assert!(message.contains("missing from the file"), "{message}");
    assert!(trainer.model().image_encoder.is_some());
    // Those 13 tensors are the fixture's (a partial read, as the import test does).
    let tensors = import::read_checkpoint(&subset).expect("container");
    assert_eq!(tensors.len(), 13);
    for (key, value) in &tensors {
        assert_eq!(value, &file[key], "{key}");
    }
}

#[test]
fn mixed_precision_fine_tuning_steps_are_finite() {
    for precision in [Precision::Bf16, Precision::F16] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut setup = hiera_setup(dir.path(), 1);
        setup.train.precision = precision;
        let mut trainer = trainer_from_fixture(setup);
        let before = import::export(trainer.model());
        let mut losses = Vec::new();
        trainer
            .run(&mut |event: &Sam2Event| {
                if let Sam2Event::Step(report) = event {
                    losses.push((report.loss.loss.map(|l| l.total), report.skipped));
                }
            })
            .expect("one step");
        println!("{precision:?}: {losses:?}");
        let (loss, skipped) = losses[0];
        assert!(loss.is_some_and(f64::is_finite), "{precision:?}: {loss:?}");
        let after = import::export(trainer.model());
        let (moved, total) = changed(&before, &after, "image_encoder.trunk.");
        // F16 may skip its first step (the loss scaler starts high); otherwise it trains.
        assert!(
            skipped || moved > total / 2,
            "{precision:?}: {moved} of {total}"
        );
    }
}

#[test]
fn cached_embeddings_of_hiera_equal_the_encoder_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = Default::default();
    let mut setup = hiera_setup(&dir.path().join("run"), 1);
    let model = write_embeddings::encoder_model::<Flex>(
        &setup.model,
        Some(&fixture("model.safetensors")),
        &device,
    )
    .expect("encoder from the fixture");
    let written = write_val_embeddings(&model, &mut setup, dir.path().join("embeddings/{split}"));

    // The file of the first image holds exactly what the encoder gives for it.
    let images = segburn_data::objects::ObjectDataConfig {
        embeddings: None,
        ..setup.data.clone()
    };
    let dataset = ObjectDataset::new(&images, "val", 128, 0).expect("dataset");
    let sample = dataset.load(0, false).expect("image");
    let pixels = sample.image.expect("pixels");
    let image = Tensor::<Flex, 4>::from_data(TensorData::new(pixels, [1, 3, 128, 128]), &device);
    let direct = model.forward_image(image).expect("forward");
    let file = written[0].dir.join(format!("{}.safetensors", sample.name));
    let cached = read_embeddings::<Flex>(&[file], 64, [8, 8], true, &device).expect("read");
    let high = (direct.high_res.expect("hr"), cached.high_res.expect("hr"));
    for (name, ours, theirs) in [
        ("image_embed", direct.image_embed, cached.image_embed),
        ("feat_s0", high.0.feat_s0, high.1.feat_s0),
        ("feat_s1", high.0.feat_s1, high.1.feat_s1),
    ] {
        assert_eq!(tensor_values(ours), tensor_values(theirs), "{name}");
    }

    // The decoder then trains on them with no encoder at all.
    setup.model.image_encoder = ImageEncoderChoice::NONE;
    setup.data.train_split = "val".to_string();
    let mut trainer = Sam2Trainer::<A>::new(setup.clone(), Default::default()).expect("trainer");
    assert!(trainer.model().image_encoder.is_none());
    assert_eq!(trainer.run(&mut quiet).expect("one step").steps, 1);
    drop(trainer);

    // A cached-embeddings config (no encoder) cannot guess a non-official trunk.
    let error = write_embeddings::encoder_model::<Flex>(
        &setup.model,
        Some(&fixture("model.safetensors")),
        &device,
    )
    .expect_err("7 blocks is no official size");
    assert!(error.to_string().contains("Custom"), "{error}");
}

#[test]
fn a_frozen_encoder_runs_outside_the_graph() {
    let setup = hiera_setup(Path::new("unused"), 1);
    let device = Default::default();
    let model = setup.model.sam2().init::<A>(&device);
    let images = Tensor::<A, 4>::ones([1, 3, 128, 128], &device);
    let features = batch::frozen_encoder_features(&model, images).expect("frozen features");
    let high_res = features.high_res.expect("high-res features");
    let loss = features.image_embed.sum() + high_res.feat_s0.sum() + high_res.feat_s1.sum();
    let grads = on_compute_pool(|| loss.backward());
    let keys: Vec<String> = list_params(&model, &dotted_path)
        .into_iter()
        .map(|p| p.key)
        .collect();
    let with_grad = gradients_by_key::<A, _>(&model, &grads, &keys, dotted_path);
    // Only the heads' part of the image path is in the graph.
    let mut names: Vec<&str> = with_grad.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "no_mem_embed",
            "sam_mask_decoder.conv_s0.bias",
            "sam_mask_decoder.conv_s0.weight",
            "sam_mask_decoder.conv_s1.bias",
            "sam_mask_decoder.conv_s1.weight",
        ]
    );
}

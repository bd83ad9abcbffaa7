//! SAM2's heads learn on the bundled sample: asserted on what training must do, with margins
//! that any correct summation order keeps.
//!
//! From scratch the heads first settle on "no mask" (every logit below 0) and only later learn
//! to put the mask where the prompt points; *when* the logits cross 0 depends on rounding (a
//! different but equally correct summation order once left the click IoU at 0 after 1600
//! steps). So the test asserts threshold-free quantities: the training loss falls, and the
//! predicted logits rank the object's pixels above the background's (AUC, from 0.5 by chance)
//! for a box and for a click on the validation split. The thresholded IoUs are printed.

use burn::module::AutodiffModule;
use burn::tensor::backend::Backend;
use burn::tensor::FloatDType;
use segburn_data::objects::ObjectDataset;
use segburn_models::sam2::Sam2;

use super::batch::{image_features, per_object, truth_views};
use super::interactive::{interactive_steps, EvalPrompts, EvalStart};
use super::tests::tiny_setup;
use super::*;
use crate::checkpoint::load_checkpoint;

type A = burn::backend::Autodiff<burn::backend::Flex>;

/// The probability that a random object pixel scores above a random background pixel (ties
/// count half): the Mann–Whitney U statistic over the pixels' ranks. `None` when the mask or
/// its background is empty.
fn ranking_auc(logits: &[f32], truth: &[u8]) -> Option<f64> {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[a].total_cmp(&logits[b]));
    let (mut rank_sum, mut positives) = (0.0f64, 0usize);
    let mut start = 0;
    while start < order.len() {
        // Pixels with equal logits share the mean of their ranks (1-based).
        let mut end = start + 1;
        while end < order.len() && logits[order[end]] == logits[order[start]] {
            end += 1;
        }
        let mean_rank = (start + 1 + end) as f64 / 2.0;
        for &pixel in &order[start..end] {
            if truth[pixel] != 0 {
                rank_sum += mean_rank;
                positives += 1;
            }
        }
        start = end;
    }
    let negatives = logits.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let p = positives as f64;
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64))
}

/// Mean AUC over every object of `dataset` after one box (`EvalStart::Box`) or one centre
/// click: `[of the mask SAM2 picks (highest predicted IoU), of the best of its masks]`. A click
/// is ambiguous (part or whole?), so the multimask outputs may each rank a different region.
fn mean_auc<B: Backend>(model: &Sam2<B>, dataset: &ObjectDataset, start: EvalStart) -> [f64; 2] {
    let device = Default::default();
    let (mut picked, mut best, mut count) = (0.0, 0.0, 0usize);
    for index in 0..dataset.len() {
        let batch = dataset.eval_batch(index).expect("validation batch");
        if batch.num_objects() == 0 {
            continue;
        }
        let encode = |images| model.forward_image(images);
        let features =
            image_features(model, &batch, &encode, FloatDType::F32, &device).expect("features");
        let features = per_object(&features, &batch.object_image);
        let truths = truth_views(&batch);
        let out = interactive_steps(model, &features, &truths, &mut EvalPrompts(start), 0, false)
            .expect("prediction");
        let prediction = &out.steps[0];
        let [_, masks, h, w] = prediction.masks.dims();
        let logits: Vec<f32> = prediction.masks.clone().into_data().to_vec().expect("f32");
        // A NaN logit would still get a rank (total order): it must fail here instead.
        assert!(
            logits.iter().all(|v| v.is_finite()),
            "non-finite mask logits"
        );
        let ious: Vec<f32> = prediction
            .iou_pred
            .clone()
            .into_data()
            .to_vec()
            .expect("f32");
        for (object, truth) in truths.iter().enumerate() {
            let auc = |mask: usize| {
                let first = (object * masks + mask) * h * w;
                ranking_auc(&logits[first..first + h * w], truth.pixels)
            };
            let scores = &ious[object * masks..(object + 1) * masks];
            let chosen = (0..masks)
                .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
                .unwrap_or(0);
            if let Some(chosen_auc) = auc(chosen) {
                picked += chosen_auc;
                best += (0..masks)
                    .filter_map(auc)
                    .max_by(f64::total_cmp)
                    .unwrap_or(chosen_auc);
                count += 1;
            }
        }
    }
    assert!(count > 0, "no object to evaluate");
    [picked / count as f64, best / count as f64]
}

#[test]
fn ranking_auc_counts_pairs_and_ties() {
    assert_eq!(ranking_auc(&[0.1, 0.9, 0.5], &[0, 1, 0]), Some(1.0));
    assert_eq!(ranking_auc(&[0.9, 0.1], &[0, 1]), Some(0.0));
    assert_eq!(ranking_auc(&[0.5, 0.5], &[0, 1]), Some(0.5));
    // Object {0.8, 0.2} against background {0.5, 0.2}: pairs won 1 + 1 + 0 + 0.5, of 4.
    assert_eq!(
        ranking_auc(&[0.8, 0.2, 0.5, 0.2], &[1, 1, 0, 0]),
        Some(0.625)
    );
    assert_eq!(ranking_auc(&[0.8, 0.2], &[0, 0]), None);
}

#[test]
fn training_on_the_sample_improves_mask_ranking() {
    // About 0.06 s a step on two cores. 1600 steps: the IoUs printed below are those of a
    // run that has also left "no mask" (box IoU 0.42–0.51 on three seeds), but the assertions
    // do not depend on it.
    let dir = tempfile::tempdir().expect("tempdir");
    let steps = 1600;
    let mut setup = tiny_setup(dir.path(), steps);
    setup.train.validate_at_end = true;
    // A long schedule horizon keeps the learning rate up for these steps.
    setup.train.epochs = 100;
    setup.prompts.eval_corrections = 1;
    setup.prompts.correction_steps = 1;
    let val = ObjectDataset::new(
        &setup.data,
        &setup.data.val_split,
        setup.model.image_size,
        0,
    )
    .expect("validation objects");
    let mut trainer = Sam2Trainer::<A>::new(setup, Default::default()).expect("trainer");
    let before = trainer.validate().expect("evaluation before");
    let initial = trainer.model().valid();
    let auc_before = [EvalStart::Box, EvalStart::Click].map(|s| mean_auc(&initial, &val, s));
    let mut losses = Vec::new();
    let mut record = |event: &Sam2Event| {
        if let Sam2Event::Step(report) = event {
            losses.push(report.loss.loss.map(|l| l.total));
        }
    };
    let summary = trainer.run(&mut record).expect("training");
    let after = summary.final_report.expect("final evaluation");
    let trained = trainer.model().valid();
    let auc_after = [EvalStart::Box, EvalStart::Click].map(|s| mean_auc(&trained, &val, s));
    let mean = |v: &[Option<f64>]| {
        let v: Vec<f64> = v.iter().filter_map(|l| *l).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let (first, last) = (mean(&losses[..50]), mean(&losses[losses.len() - 50..]));
    println!(
        "before:\n{before}\nafter {steps} steps ({:.1} s):\n{after}\nloss {first:.4} -> {last:.4}\n\
         ranking AUC [picked, best of the masks]: box {:.4?} -> {:.4?}, click {:.4?} -> {:.4?}",
        summary.seconds, auc_before[0], auc_after[0], auc_before[1], auc_after[1]
    );
    assert_eq!(summary.steps, steps);
    assert!(last < 0.8 * first, "loss {first} -> {last}");
    // Learning where the prompt points: the box must rank its object well above chance and
    // above the untrained model; so must one of a click's masks (a click is ambiguous, and
    // which mask the predicted IoU picks is itself still being learned). Measured with the
    // default seed and seeds 1 and 2 (a far larger change than a summation order): loss
    // 7.75 / 17.4 / 7.13 -> 2.00 / 2.06 / 2.06, box AUC 0.45-0.53 -> 0.98 / 0.98 / 0.98, best
    // click-mask AUC 0.60-0.64 -> 0.96 / 0.97 / 0.94; the picked click mask 0.59 / 0.75 / 0.87
    // (not asserted) and click IoU 0.26 / 0.23 / 0.19.
    let [[box_before, _], [click_before, _]] = auc_before;
    let [[box_after, _], [_, click_best]] = auc_after;
    let report = format!("AUC {auc_before:?} -> {auc_after:?}");
    assert!(
        box_after > 0.8 && box_after > box_before + 0.1,
        "box {report}"
    );
    assert!(
        click_best > 0.7 && click_best > click_before + 0.05,
        "click {report}"
    );
    // The run directory has the log, the metrics and a loadable checkpoint.
    for file in ["train.log", "metrics.jsonl", "metrics.csv"] {
        assert!(dir.path().join(file).is_file(), "{file}");
    }
    let checkpoint = load_checkpoint(&summary.last_checkpoint.expect("checkpoint")).expect("load");
    assert_eq!(checkpoint.meta.state.step, steps);
    assert!(checkpoint.model.contains_key(POSITION_BUFFER_KEY));
    assert!(checkpoint
        .optimizer
        .keys()
        .all(|k| !k.contains("positional_encoding")));
}

//! Half-precision training (Bf16, F16) of the SAM2 heads against F32 from the same weights,
//! with clicks and boxes and with mask prompts.

use std::path::Path;

use burn::backend::{Autodiff, Flex};

use super::tests::tiny_setup;
use super::*;

type A = Autodiff<Flex>;

fn quiet(_: &Sam2Event) {}

/// Bf16 and F16 train the heads in half precision from the same weights as F32: the first
/// step's loss is close to F32's but not equal (the decoder really ran in half precision),
/// every loss is finite, and F16's loss scaler is on and lets steps through.
#[test]
fn half_precision_trains_close_to_f32() {
    half_precision_close_to_f32(0.0);
}

/// The same with half the batches started from mask prompts (`prompts.prob_mask`), then
/// corrected with clicks on top of the previous mask.
#[test]
fn half_precision_trains_from_mask_prompts_close_to_f32() {
    half_precision_close_to_f32(0.5);
}

fn half_precision_close_to_f32(prob_mask: f64) {
    use crate::mixed_precision::Precision;
    let steps = 6;
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    // Without the hard object-score gate: at initialisation the score logits sit near 0, and
    // a bf16 rounding that flips one's sign swaps a whole mask for -1024 (a different loss
    // by design, not a precision error).
    let setup = |dir: &Path, precision: Precision| {
        let mut setup = tiny_setup(dir, steps);
        setup.model.gate_masks_by_object_score = false;
        setup.train.precision = precision;
        setup.prompts.prob_mask = prob_mask;
        setup
    };
    let mut reference =
        Sam2Trainer::<A>::new(setup(dirs[0].path(), Precision::F32), Default::default())
            .expect("trainer");
    let initial = reference.save(&mut quiet).expect("initial checkpoint");
    let run = |trainer: &mut Sam2Trainer<A>| {
        let mut reports = Vec::new();
        trainer
            .run(&mut |event: &Sam2Event| {
                if let Sam2Event::Step(r) = event {
                    reports.push((r.loss.loss.map(|l| l.total), r.skipped));
                }
            })
            .expect("training");
        reports
    };
    let full = run(&mut reference);
    for (index, precision) in [(1, Precision::Bf16), (2, Precision::F16)] {
        let mut trainer =
            Sam2Trainer::<A>::new(setup(dirs[index].path(), precision), Default::default())
                .expect("trainer");
        trainer.resume(&initial).expect("same initial weights");
        assert_eq!(
            trainer.state().loss_scaler.enabled,
            precision == Precision::F16
        );
        let half = run(&mut trainer);
        let (a, b) = (full[0].0.expect("loss"), half[0].0.expect("loss"));
        println!("{precision:?}: first loss {b} vs f32 {a}; steps {half:?}");
        assert!(half.iter().all(|(l, _)| l.is_none_or(f64::is_finite)));
        assert_ne!(a, b, "{precision:?} gave exactly the f32 loss");
        assert!((a - b).abs() < 0.01 * a.abs(), "{precision:?}: {b} vs {a}");
        let applied = half.iter().filter(|(_, skipped)| !skipped).count();
        assert!(applied >= steps as usize / 2, "{precision:?}: {half:?}");
    }
}

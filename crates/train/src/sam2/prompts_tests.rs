//! Prompt sampling: clicks in the right regions, boxes within the noise bound, reproducible.

use super::*;

const SIZE: usize = 32;

/// A 12×8 rectangle at (10, 6).
fn rectangle() -> Vec<u8> {
    let mut mask = vec![0u8; SIZE * SIZE];
    for y in 6..14 {
        for x in 10..22 {
            mask[y * SIZE + x] = 1;
        }
    }
    mask
}

fn view(pixels: &[u8]) -> MaskView<'_> {
    MaskView { size: SIZE, pixels }
}

fn at(mask: &[u8], click: &Click) -> bool {
    mask[click.y as usize * SIZE + click.x as usize] != 0
}

#[test]
fn first_clicks_fall_inside_the_object_and_cover_it() {
    let truth = rectangle();
    let mut rng = prompt_rng(7, 0, 1);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2000 {
        let click = click_inside(view(&truth), &mut rng).expect("click");
        assert_eq!(click.label, POSITIVE);
        assert!(at(&truth, &click), "{click:?}");
        assert_eq!(click.x.fract(), 0.0);
        seen.insert((click.x as usize, click.y as usize));
    }
    // Uniform over the 96 pixels: 2000 draws see (nearly) all of them.
    assert!(seen.len() > 90, "{} distinct pixels", seen.len());
}

#[test]
fn boxes_stay_within_the_noise_bound_and_the_image() {
    let truth = rectangle();
    let tight = tight_box(view(&truth)).expect("box");
    assert_eq!(tight, [10.0, 6.0, 21.0, 13.0]);
    // Sides (x1 − x0, y1 − y0) = (11, 7): bounds 1.1 and 0.7 px with SAM2's 10 %.
    let mut rng = prompt_rng(7, 3, 2);
    let (mut widest_x, mut widest_y) = (0.0f32, 0.0f32);
    for _ in 0..2000 {
        let [a, b] = noisy_box(view(&truth), 0.1, 20.0, &mut rng).expect("box");
        assert_eq!((a.label, b.label), (BOX_TOP_LEFT, BOX_BOTTOM_RIGHT));
        for (value, tight, bound) in [
            (a.x, tight[0], 1.1),
            (a.y, tight[1], 0.7),
            (b.x, tight[2], 1.1),
            (b.y, tight[3], 0.7),
        ] {
            assert!(
                (value - tight).abs() <= bound + 1e-5,
                "{value} vs {tight} ± {bound}"
            );
        }
        widest_x = widest_x.max((a.x - tight[0]).abs());
        widest_y = widest_y.max((a.y - tight[1]).abs());
    }
    // The noise uses its whole range.
    assert!(widest_x > 1.0 && widest_y > 0.6, "{widest_x} {widest_y}");

    // The absolute cap and the image bounds: a full-image object with a large noise fraction.
    let full = vec![1u8; SIZE * SIZE];
    for _ in 0..500 {
        let [a, b] = noisy_box(view(&full), 0.5, 3.0, &mut rng).expect("box");
        for v in [a.x, a.y, b.x, b.y] {
            assert!((0.0..=(SIZE - 1) as f32).contains(&v), "{v}");
        }
        assert!(a.x <= 3.0 && b.x >= (SIZE - 1) as f32 - 3.0);
    }
}

#[test]
fn corrections_click_false_negatives_positive_and_false_positives_negative() {
    let truth = rectangle();
    // The prediction misses the left half and spills 4 rows below.
    let mut prediction = vec![0u8; SIZE * SIZE];
    for y in 6..18 {
        for x in 16..22 {
            prediction[y * SIZE + x] = 1;
        }
    }
    let mut rng = prompt_rng(1, 9, 4);
    let (mut positives, mut negatives) = (0, 0);
    for _ in 0..1000 {
        let click = correction_click(view(&truth), view(&prediction), &mut rng).expect("click");
        let (t, p) = (at(&truth, &click), at(&prediction, &click));
        match click.label {
            POSITIVE => {
                assert!(
                    t && !p,
                    "positive click outside the false negatives: {click:?}"
                );
                positives += 1;
            }
            NEGATIVE => {
                assert!(
                    !t && p,
                    "negative click outside the false positives: {click:?}"
                );
                negatives += 1;
            }
            other => panic!("label {other}"),
        }
    }
    // 48 false-negative and 24 false-positive pixels: clicks are uniform over their union.
    let share = f64::from(positives) / 1000.0;
    assert!(
        (share - 48.0 / 72.0).abs() < 0.06,
        "{positives} / {negatives}"
    );

    // A perfect prediction clicks on the background, negatively.
    let click = correction_click(view(&truth), view(&truth), &mut rng).expect("click");
    assert_eq!(click.label, NEGATIVE);
    assert!(!at(&truth, &click));
}

#[test]
fn training_prompts_are_reproducible_for_a_seed() {
    let truth = rectangle();
    let truths = [view(&truth), view(&truth), view(&truth)];
    let config = PromptConfig::default();
    let run_micro = |seed: u64, step: u64, micro: usize| {
        let mut prompts = TrainingPrompts::new(&config, seed, step, micro, 3);
        let first = prompts.first(&truths);
        let empty = vec![0u8; SIZE * SIZE];
        let predictions = [view(&empty), view(&truth), view(&empty)];
        let clicks: Vec<Vec<Click>> = (0..config.correction_steps)
            .map(|_| prompts.correction(&truths, &predictions))
            .collect();
        (first, clicks)
    };
    let run = |seed: u64, step: u64| run_micro(seed, step, 0);
    assert_eq!(run(123, 5), run(123, 5));
    // The micro-batches of one step draw apart.
    assert_ne!(run_micro(123, 5, 1), run(123, 5));
    assert_ne!(run(123, 5), run(123, 6));
    assert_ne!(run(123, 5), run(124, 5));
    // Every object of a batch gets the same kind of first prompt, and boxes and clicks both
    // occur across steps (p = 0.5).
    let kinds: Vec<usize> = (0..40)
        .map(|step| {
            let first = match run(9, step).0 {
                FirstPrompt::Points(points) => points,
                FirstPrompt::TruthMask => panic!("a mask prompt with prob_mask 0"),
            };
            assert!(first.iter().all(|p| p.len() == first[0].len()));
            first[0].len()
        })
        .collect();
    assert!(kinds.contains(&1) && kinds.contains(&2), "{kinds:?}");
    // Objects draw from their own streams: the same mask gets different clicks.
    let (_, clicks) = run(3, 0);
    assert!(clicks.iter().any(|step| step[0] != step[2]));
}

#[test]
fn prompt_config_errors_name_the_field() {
    let config = PromptConfig {
        prob_box: 1.5,
        ..PromptConfig::default()
    };
    let error = config.check().unwrap_err().to_string();
    assert!(error.contains("prompts.prob_box"), "{error}");
}

/// `prob_mask` starts that fraction of batches from the masks; the others get exactly the
/// clicks or boxes a run without the option draws (the mask draw comes after the box draw and
/// is made only when the option is on).
#[test]
fn mask_prompts_start_their_share_of_batches_and_leave_the_others_unchanged() {
    let truth = rectangle();
    let truths = [view(&truth), view(&truth)];
    let first = |config: &PromptConfig, step: u64| {
        TrainingPrompts::new(config, 11, step, 0, truths.len()).first(&truths)
    };
    let without = PromptConfig::default();
    let half = PromptConfig {
        prob_mask: 0.5,
        ..PromptConfig::default()
    };
    let always = PromptConfig {
        prob_mask: 1.0,
        ..PromptConfig::default()
    };
    let steps = 400;
    let mut masks = 0;
    for step in 0..steps {
        assert_eq!(first(&always, step), FirstPrompt::TruthMask);
        match first(&half, step) {
            FirstPrompt::TruthMask => masks += 1,
            points => assert_eq!(points, first(&without, step), "step {step}"),
        }
    }
    // Binomial(400, 0.5): 200 ± 10 (one standard deviation); ±50 is five.
    assert!((150..=250).contains(&masks), "{masks} of {steps}");
    let error = PromptConfig {
        prob_mask: -0.1,
        ..PromptConfig::default()
    }
    .check()
    .unwrap_err()
    .to_string();
    assert!(error.contains("prompts.prob_mask"), "{error}");
}

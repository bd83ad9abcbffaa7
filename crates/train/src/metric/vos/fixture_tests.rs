//! Parity with the official DAVIS 2017 evaluation (`tests/fixtures/vos_metrics/`, written by
//! `scripts/fixtures/vos_metrics.py`): every J, F, statistic and the split's J&F within 1e-12
//! (in practice bit for bit); a NaN anywhere fails.

use segburn_models::fixtures::Fixture;

use super::*;

const TOLERANCE: f64 = 1e-12;
/// The sequences in the order of the fixture's ImageSets list.
const SEQUENCES: [&str; 3] = ["twoobj", "threeobj", "short"];

fn load(name: &str) -> Fixture {
    Fixture::load(&format!("vos_metrics/{name}"))
        .unwrap_or_else(|e| panic!("fixture vos_metrics/{name}: {e}"))
}

fn values(fixture: &Fixture, key: &str) -> Vec<f64> {
    fixture
        .values_f64(key)
        .unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// A u8 tensor's shape and values.
fn bytes(fixture: &Fixture, key: &str) -> (Vec<usize>, Vec<u8>) {
    let data = fixture.data(key).unwrap_or_else(|e| panic!("{key}: {e}"));
    let shape = data.shape.to_vec();
    let values = data
        .to_vec::<u8>()
        .unwrap_or_else(|e| panic!("{key}: not u8: {e:?}"));
    (shape, values)
}

fn binary(fixture: &Fixture, key: &str) -> BinaryMask {
    let (shape, values) = bytes(fixture, key);
    assert_eq!(shape.len(), 2, "{key}: {shape:?}");
    BinaryMask::from_u8(shape[0], shape[1], &values).expect("a whole mask")
}

/// The largest |got − expected|; NaN (on either side) or a length mismatch is infinite.
fn max_error(got: &[f64], expected: &[f64]) -> f64 {
    if got.len() != expected.len() {
        return f64::INFINITY;
    }
    segburn_models::fixtures::max_abs_diff(got, expected)
}

#[test]
fn pairs_match_the_official_j_and_f() {
    let fixture = load("pairs.safetensors");
    let mut names: Vec<&str> = fixture
        .tensors()
        .keys()
        .filter_map(|k| k.strip_prefix("pair.")?.strip_suffix(".gt"))
        .collect();
    names.sort_unstable();
    assert!(names.len() >= 20, "{} pairs", names.len());
    let mut worst: f64 = 0.0;
    for name in names {
        let key = |what: &str| format!("pair.{name}.{what}");
        let gt = binary(&fixture, &key("gt"));
        let pred = binary(&fixture, &key("pred"));
        let void = fixture
            .tensors()
            .contains_key(&key("void"))
            .then(|| binary(&fixture, &key("void")));
        let bound_th = values(&fixture, &key("bound_th"))[0];
        let j = region_similarity(&pred, &gt, void.as_ref()).expect("J");
        let f = boundary_f_measure(&pred, &gt, void.as_ref(), bound_th).expect("F");
        let error_j = max_error(&[j], &values(&fixture, &key("j")));
        let error_f = max_error(&[f], &values(&fixture, &key("f")));
        assert!(error_j <= TOLERANCE, "{name}: J {j} off by {error_j}");
        assert!(error_f <= TOLERANCE, "{name}: F {f} off by {error_f}");
        worst = worst.max(error_j).max(error_f);
    }
    println!("pairs: worst |error| {worst:e}");
}

#[test]
fn statistics_match_db_statistics() {
    let fixture = load("statistics.safetensors");
    let mut worst: f64 = 0.0;
    for key in fixture.tensors().keys().filter(|k| k.ends_with(".values")) {
        let n = key.trim_end_matches(".values");
        let s = statistics(&values(&fixture, key)).expect("statistics");
        let expected = values(&fixture, &format!("{n}.out"));
        let error = max_error(&[s.mean, s.recall, s.decay], &expected);
        assert!(error <= TOLERANCE, "{n}: {s:?} vs {expected:?}");
        worst = worst.max(error);
    }
    println!("statistics: worst |error| {worst:e}");
}

fn label_maps(fixture: &Fixture, key: &str) -> Vec<LabelMap> {
    let (shape, values) = bytes(fixture, key);
    assert_eq!(shape.len(), 3, "{key}: {shape:?}");
    let (h, w) = (shape[1], shape[2]);
    values
        .chunks(h * w)
        .map(|frame| LabelMap::new(h, w, frame.to_vec()).expect("a whole frame"))
        .collect()
}

#[test]
fn sequences_match_the_official_evaluation() {
    let fixture = load("sequences.safetensors");
    let mut evaluation = DavisEvaluation::new();
    let mut worst: f64 = 0.0;
    for name in SEQUENCES {
        let key = |what: &str| format!("seq.{name}.{what}");
        let gt = label_maps(&fixture, &key("gt"));
        let pred = label_maps(&fixture, &key("pred"));
        let objects = evaluation
            .add_sequence(name, &gt, &pred)
            .expect("evaluates");
        let flat = |pick: &dyn Fn(&ObjectResult) -> Vec<f64>| -> Vec<f64> {
            objects.iter().flat_map(pick).collect()
        };
        for (what, got) in [
            ("j", flat(&|o| o.j.clone())),
            ("f", flat(&|o| o.f.clone())),
            (
                "j_stats",
                flat(&|o| vec![o.j_stats.mean, o.j_stats.recall, o.j_stats.decay]),
            ),
            (
                "f_stats",
                flat(&|o| vec![o.f_stats.mean, o.f_stats.recall, o.f_stats.decay]),
            ),
        ] {
            let error = max_error(&got, &values(&fixture, &key(what)));
            assert!(error <= TOLERANCE, "{name}.{what}: off by {error}");
            worst = worst.max(error);
        }
    }
    let per_object = |pick: &dyn Fn(&ObjectResult) -> f64| -> Vec<f64> {
        evaluation.objects().iter().map(pick).collect()
    };
    let error_j = max_error(
        &per_object(&|o| o.j_stats.mean),
        &values(&fixture, "per_object_j_mean"),
    );
    let error_f = max_error(
        &per_object(&|o| o.f_stats.mean),
        &values(&fixture, "per_object_f_mean"),
    );
    let s = evaluation.summary().expect("objects");
    let global = [
        s.jf_mean, s.j.mean, s.j.recall, s.j.decay, s.f.mean, s.f.recall, s.f.decay,
    ];
    let error_global = max_error(&global, &values(&fixture, "global"));
    assert!(
        error_j <= TOLERANCE && error_f <= TOLERANCE,
        "{error_j} {error_f}"
    );
    assert!(
        error_global <= TOLERANCE,
        "global {global:?}: off by {error_global}"
    );
    worst = worst.max(error_j).max(error_f).max(error_global);
    println!("sequences: J&F {} ; worst |error| {worst:e}", s.jf_mean);
}

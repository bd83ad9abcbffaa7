//! Hand-made cases of the J / F measures, the statistics and the sequence evaluation.

use super::*;

fn mask(rows: &[&str]) -> BinaryMask {
    let width = rows.first().map_or(0, |r| r.len());
    let pixels = rows
        .iter()
        .flat_map(|r| r.chars().map(|c| c == '#'))
        .collect();
    BinaryMask::new(rows.len(), width, pixels).expect("rows of equal length")
}

fn labels(rows: &[&str]) -> LabelMap {
    let width = rows.first().map_or(0, |r| r.len());
    let values = rows
        .iter()
        .flat_map(|r| {
            r.chars()
                .map(|c| if c == 'v' { VOID_LABEL } else { c as u8 - b'0' })
        })
        .collect();
    LabelMap::new(rows.len(), width, values).expect("rows of equal length")
}

#[test]
fn both_empty_scores_one() {
    let empty = BinaryMask::empty(4, 5);
    assert_eq!(region_similarity(&empty, &empty, None), Ok(1.0));
    assert_eq!(
        boundary_f_measure(&empty, &empty, None, DEFAULT_BOUND_TH),
        Ok(1.0)
    );
}

#[test]
fn identical_masks_score_one() {
    let m = mask(&["....", ".##.", ".##.", "...."]);
    assert_eq!(region_similarity(&m, &m, None), Ok(1.0));
    assert_eq!(boundary_f_measure(&m, &m, None, DEFAULT_BOUND_TH), Ok(1.0));
}

#[test]
fn disjoint_and_one_sided_masks_score_zero() {
    let a = mask(&["##......", "##......", "........", "........"]);
    let b = mask(&["........", "........", "......##", "......##"]);
    assert_eq!(region_similarity(&a, &b, None), Ok(0.0));
    // radius ceil(0.008 · √80) = 1: the boundaries are 4 pixels apart.
    assert_eq!(boundary_f_measure(&a, &b, None, DEFAULT_BOUND_TH), Ok(0.0));
    let empty = BinaryMask::empty(4, 8);
    assert_eq!(
        boundary_f_measure(&empty, &b, None, DEFAULT_BOUND_TH),
        Ok(0.0)
    );
    assert_eq!(
        boundary_f_measure(&a, &empty, None, DEFAULT_BOUND_TH),
        Ok(0.0)
    );
}

#[test]
fn iou_counts_and_void_by_hand() {
    let pred = mask(&["###.", "###.", "...."]);
    let gt = mask(&[".###", ".###", "...."]);
    assert_eq!(region_similarity(&pred, &gt, None), Ok(4.0 / 8.0));
    let void = mask(&["#...", "#...", "...."]);
    assert_eq!(region_similarity(&pred, &gt, Some(&void)), Ok(4.0 / 6.0));
    let all = mask(&["####", "####", "####"]);
    assert_eq!(region_similarity(&pred, &gt, Some(&all)), Ok(1.0));
}

#[test]
fn boundary_map_follows_seg2bmap() {
    // A 2×2 square at (1, 1) of a 4×4 mask: the boundary is offset towards the origin.
    let m = mask(&["....", ".##.", ".##.", "...."]);
    let b = measures::boundary_map(m.pixels(), 4, 4);
    let rows: Vec<String> = b
        .chunks(4)
        .map(|r| r.iter().map(|&p| if p { '#' } else { '.' }).collect())
        .collect();
    assert_eq!(rows, ["###.", "#.#.", "###.", "...."]);
    // The last row compares along itself only, the last corner is never a boundary.
    let full = mask(&["###", "###"]);
    assert!(measures::boundary_map(full.pixels(), 2, 3)
        .iter()
        .all(|&p| !p));
}

#[test]
fn size_mismatch_names_both_sizes() {
    let a = BinaryMask::empty(48, 64);
    let b = BinaryMask::empty(64, 48);
    let error = region_similarity(&a, &b, None).unwrap_err();
    assert_eq!(
        error,
        VosError::SizeMismatch {
            what: "prediction".into(),
            height: 64,
            width: 48,
            got_height: 48,
            got_width: 64,
        }
    );
    let message = error.to_string();
    assert!(
        message.contains("48×64") && message.contains("64×48"),
        "{message}"
    );
    let void = BinaryMask::empty(2, 2);
    assert!(matches!(
        boundary_f_measure(&b, &b, Some(&void), DEFAULT_BOUND_TH),
        Err(VosError::SizeMismatch { .. })
    ));
    assert!(matches!(
        BinaryMask::new(3, 3, vec![false; 8]),
        Err(VosError::PixelCount {
            expected: 9,
            got: 8,
            ..
        })
    ));
    assert!(LabelMap::new(usize::MAX, 2, vec![]).is_err());
}

#[test]
fn invalid_bound_th_is_an_error() {
    let m = mask(&["#."]);
    for bound_th in [-0.1, f64::NAN, f64::INFINITY, 1e9] {
        assert!(matches!(
            boundary_f_measure(&m, &m, None, bound_th),
            Err(VosError::InvalidBoundTh { .. })
        ));
    }
}

#[test]
fn statistics_by_hand() {
    let s = statistics(&[1.0, 0.5, 0.75, 0.0, 0.25]).expect("values");
    assert_eq!(s.mean, 2.5 / 5.0);
    assert_eq!(s.recall, 2.0 / 5.0);
    // ids 0, 1, 2, 3, 4: bins [0..=1] and [3..=4].
    assert_eq!(s.decay, 0.75 - 0.125);
    assert_eq!(statistics(&[0.7]).expect("one value").decay, 0.0);
    assert!(matches!(statistics(&[]), Err(VosError::Empty { .. })));
    assert_eq!(
        statistics(&[0.1, f64::NAN]),
        Err(VosError::NotANumber { index: 1 })
    );
}

#[test]
fn numpy_sum_is_pairwise() {
    // From 8 values on numpy sums with 8 accumulators: 1e16 + 1 + ... differs from a plain
    // loop (np.sum gives 1e16 + 14 here).
    let mut values = vec![1.0; 16];
    values[0] = 1e16;
    assert_eq!(numpy_sum(&values), 1e16 + 14.0);
    assert_eq!(values.iter().sum::<f64>(), 1e16);
}

#[test]
fn sequence_semi_supervised_by_hand() {
    let gt = [
        labels(&["1100", "1100", "0022"]),
        labels(&["1100", "1v00", "0022"]),
        labels(&["0110", "0110", "0000"]),
        labels(&["0000", "0000", "0000"]),
    ];
    let pred = [
        labels(&["2222", "2222", "2222"]), // first frame: not read
        labels(&["1100", "1100", "0000"]),
        labels(&["0110", "0000", "0000"]),
        labels(&["9999", "9999", "9999"]), // last frame: not read
    ];
    let mut evaluation = DavisEvaluation::new();
    let objects = evaluation
        .add_sequence("toy", &gt, &pred)
        .expect("evaluates");
    assert_eq!(objects.len(), 2);
    // Void counts as background in the semi-supervised task: frame 1 has 3 gt pixels.
    assert_eq!(objects[0].j, vec![3.0 / 4.0, 2.0 / 4.0]);
    assert_eq!(objects[1].j, vec![0.0, 1.0]);
    assert_eq!(objects[1].f, vec![0.0, 1.0]);
    assert_eq!(objects[0].name(), "toy_1");
    let summary = evaluation.summary().expect("objects");
    assert_eq!(summary.objects, 2);
    assert_eq!(summary.j.mean, (0.625 + 0.5) / 2.0);
    assert_eq!(summary.jf_mean, (summary.j.mean + summary.f.mean) / 2.0);
}

#[test]
fn sequence_errors() {
    let frame = labels(&["10", "00"]);
    let three = [frame.clone(), frame.clone(), frame.clone()];
    let mut evaluation = DavisEvaluation::new();
    assert!(matches!(
        evaluation.add_sequence("s", &three[..2], &three[..2]),
        Err(VosError::TooFewFrames { frames: 2, .. })
    ));
    assert!(matches!(
        evaluation.add_sequence("s", &three, &three[..2]),
        Err(VosError::FrameCount { .. })
    ));
    let unknown = [frame.clone(), labels(&["20", "00"]), frame.clone()];
    assert!(matches!(
        evaluation.add_sequence("s", &three, &unknown),
        Err(VosError::UnknownObject {
            predicted: 2,
            objects: 1,
            ..
        })
    ));
    let wide = [frame.clone(), labels(&["100", "000"]), frame.clone()];
    assert!(matches!(
        evaluation.add_sequence("s", &three, &wide),
        Err(VosError::SizeMismatch { .. })
    ));
    assert!(evaluation.objects().is_empty());
    assert!(matches!(evaluation.summary(), Err(VosError::Empty { .. })));
}

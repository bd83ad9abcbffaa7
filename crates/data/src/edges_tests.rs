//! Edge-map tests: the `NeighbourDiff` rule against a pixel-by-pixel reference, the `Official`
//! rule against `cv2.Canny` + `gen_sample` outputs of the official code (fixtures).

use super::*;
use crate::test_support::FixtureTensors;

/// segburn's former rule, with the official pad and dilation.
fn neighbour() -> EdgeConfig {
    EdgeConfig {
        rule: EdgeRule::NeighbourDiff,
        ..EdgeConfig::default()
    }
}

fn no_pad(dilation: usize) -> EdgeConfig {
    EdgeConfig {
        dilation,
        pad: false,
        ..neighbour()
    }
}

/// A straightforward reference of the `NeighbourDiff` rule: mark, then dilate pixel by pixel.
fn reference(label: &[u8], w: usize, h: usize, config: &EdgeConfig) -> Vec<u8> {
    let at = |x: usize, y: usize| label[y * w + x];
    let mut mark = vec![0u8; w * h];
    for y in 0..h {
        for x in 0..w {
            let right = x + 1 < w && at(x, y) != at(x + 1, y);
            let down = y + 1 < h && at(x, y) != at(x, y + 1);
            let inside = !config.pad
                || (x >= config.pad_width
                    && y >= config.pad_width
                    && x + config.pad_width < w
                    && y + config.pad_width < h);
            mark[y * w + x] = u8::from((right || down) && inside);
        }
    }
    let anchor = (config.dilation / 2) as isize;
    let mut out = vec![0u8; w * h];
    for y in 0..h as isize {
        for x in 0..w as isize {
            let mut any = 0;
            for dy in 0..config.dilation as isize {
                for dx in 0..config.dilation as isize {
                    let (sx, sy) = (x + dx - anchor, y + dy - anchor);
                    if sx >= 0 && sy >= 0 && sx < w as isize && sy < h as isize {
                        any |= mark[sy as usize * w + sx as usize];
                    }
                }
            }
            out[y as usize * w + x as usize] = any;
        }
    }
    out
}

#[test]
fn a_vertical_boundary_gives_the_official_band() {
    // Columns 0..5 are class 1, 5..12 class 2: the mark sits at x = 4 (left of the change).
    let (w, h) = (12, 3);
    let label: Vec<u8> = (0..w * h).map(|i| if i % w < 5 { 1 } else { 2 }).collect();
    // Both rules mark the left side of a straight step.
    for config in [no_pad(4), official(false)] {
        let edges = edge_map(&label, w, h, &config);
        // 4x4 dilation, anchor 2: the band covers x = 4-1 ..= 4+2.
        let expected_row: Vec<u8> = (0..w).map(|x| u8::from((3..=6).contains(&x))).collect();
        for y in 0..h {
            assert_eq!(
                &edges[y * w..(y + 1) * w],
                &expected_row[..],
                "{config:?} row {y}"
            );
        }
    }
}

#[test]
fn matches_the_pixelwise_reference_with_and_without_pad() {
    let (w, h) = (37, 29);
    let mut state = 7u64;
    let mut label = vec![0u8; w * h];
    // Blocky random regions plus some ignore pixels.
    for by in 0..(h / 4 + 1) {
        for bx in 0..(w / 5 + 1) {
            state = crate::rng::mix(state);
            let value = [0u8, 1, 2, 255][(state % 4) as usize];
            for y in by * 4..((by + 1) * 4).min(h) {
                for x in bx * 5..((bx + 1) * 5).min(w) {
                    label[y * w + x] = value;
                }
            }
        }
    }
    for config in [
        no_pad(4),
        no_pad(1),
        no_pad(3),
        neighbour(),
        EdgeConfig {
            pad_width: 40,
            ..neighbour()
        },
    ] {
        let fast = edge_map(&label, w, h, &config);
        assert_eq!(fast, reference(&label, w, h, &config), "{config:?}");
        assert!(fast.iter().all(|&e| e <= 1));
    }
    assert!(edge_map(&label, w, h, &no_pad(4)).contains(&1));
}

#[test]
fn a_uniform_label_has_no_edge_and_tiny_maps_work() {
    assert!(edge_map(&[3u8; 64], 8, 8, &no_pad(4))
        .iter()
        .all(|&e| e == 0));
    assert_eq!(edge_map(&[1, 2], 2, 1, &no_pad(4)), vec![1, 1]);
    assert!(edge_map(&[], 0, 0, &EdgeConfig::default()).is_empty());
}

/// The label maps of `pipeline/edges.safetensors`.
const EDGE_CASES: [&str; 6] = [
    "rand_29x31",
    "rand_97x131",
    "rand_128x256",
    "rand_241x319",
    "photo_butterfly_356x493",
    "photo_fruits_gray_161x203",
];

fn official(pad: bool) -> EdgeConfig {
    EdgeConfig {
        pad,
        ..EdgeConfig::default()
    }
}

/// How many pixels differ, and where the first one is.
fn mismatch(ours: &[u8], theirs: &[u8], width: usize) -> Option<(usize, (usize, usize))> {
    assert_eq!(ours.len(), theirs.len(), "sizes");
    let differing: Vec<usize> = (0..ours.len()).filter(|&i| ours[i] != theirs[i]).collect();
    differing
        .first()
        .map(|&i| (differing.len(), (i / width, i % width)))
}

#[test]
fn the_official_rule_is_the_default() {
    assert_eq!(EdgeConfig::default().rule, EdgeRule::Official);
}

#[test]
fn canny_and_edge_targets_equal_the_official_ones_on_every_fixture_map() {
    let fixture = FixtureTensors::load("pipeline/edges.safetensors");
    for case in EDGE_CASES {
        let (shape, label) = fixture.u8(&format!("{case}.label"));
        let (height, width) = (shape[0], shape[1]);
        let canny: Vec<u8> = crate::canny::canny_marks(&label, width, height)
            .iter()
            .map(|&m| m * 255)
            .collect();
        let (_, expected) = fixture.u8(&format!("{case}.canny"));
        assert_eq!(
            mismatch(&canny, &expected, width),
            None,
            "{case}: raw Canny"
        );
        for pad in [true, false] {
            let (_, expected) = fixture.u8(&format!("{case}.edge_pad_{pad}"));
            let ours = edge_map(&label, width, height, &official(pad));
            assert_eq!(
                mismatch(&ours, &expected, width),
                None,
                "{case}: edge_pad {pad} (pixels differing, first (row, column))"
            );
        }
        // The former rule differs on these maps, so the comparison has teeth.
        let (_, expected) = fixture.u8(&format!("{case}.edge_pad_true"));
        let former = edge_map(&label, width, height, &neighbour());
        assert!(mismatch(&former, &expected, width).is_some(), "{case}");
    }
}

#[test]
fn the_512px_training_batch_of_the_gradient_fixture_gets_its_official_edges() {
    let fixture = FixtureTensors::load("pipeline/grads.safetensors");
    let (shape, labels) = fixture.u8("labels");
    let (_, expected) = fixture.u8("bd_gt");
    let (height, width) = (shape[1], shape[2]);
    let plane = height * width;
    for b in 0..shape[0] {
        let range = b * plane..(b + 1) * plane;
        let ours = edge_map(&labels[range.clone()], width, height, &official(true));
        assert_eq!(mismatch(&ours, &expected[range], width), None, "sample {b}");
    }
}

/// A one-sample folder-pair dataset holding `label` (ids 0..=254 are classes, 255 is ignored),
/// under a folder name with a space and non-ASCII letters.
fn one_sample_dataset(
    dir: &std::path::Path,
    label: &[u8],
    width: usize,
    height: usize,
) -> crate::DataConfig {
    let root = dir.join("kanten prüfung");
    let images = root.join("images");
    let masks = root.join("masks");
    crate::test_support::write_png(&images.join("case.png"), width, height, 1, label);
    crate::test_support::write_png(&masks.join("case.png"), width, height, 1, label);
    let mut config = crate::DataConfig {
        layout: crate::Layout::folder_pair(
            images,
            masks,
            (0..255).map(|c| format!("class {c}")).collect(),
        ),
        ..crate::DataConfig::default()
    };
    // The identity geometry: no scaling, no flip, a crop of the whole image.
    config.augment.multi_scale = false;
    config.augment.flip = false;
    config.augment.crop_width = width;
    config.augment.crop_height = height;
    config
}

#[test]
fn the_training_pipeline_produces_the_official_edges() {
    let fixture = FixtureTensors::load("pipeline/edges.safetensors");
    let dir = tempfile::tempdir().expect("temp dir");
    for case in EDGE_CASES {
        let (shape, label) = fixture.u8(&format!("{case}.label"));
        let (height, width) = (shape[0], shape[1]);
        let case_dir = dir.path().join(case);
        let mut config = one_sample_dataset(&case_dir, &label, width, height);
        let index = crate::DatasetIndex::new(&config.layout, "train", 255).expect("index");
        for pad in [true, false] {
            config.edges.pad = pad;
            let pipeline = crate::Pipeline::new(&config, crate::Mode::Train).expect("pipeline");
            let mut rng = crate::rng::SplitMix64::new(5);
            let sample = pipeline
                .load(&index.samples()[0], index.label_map(), &mut rng)
                .expect("sample");
            assert_eq!(sample.label, label, "{case}: the geometry is the identity");
            let (_, expected) = fixture.u8(&format!("{case}.edge_pad_{pad}"));
            assert_eq!(
                mismatch(&sample.edges, &expected, width),
                None,
                "{case}: edge_pad {pad}"
            );
        }
    }
}

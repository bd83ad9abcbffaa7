//! Label mapping tests: the official tables, counting of bad values, configuration errors.

use super::*;

#[test]
fn cityscapes_label_ids_map_to_the_official_train_ids() {
    let map = LabelMap::new(&LabelEncoding::CityscapesLabelIds, 255).expect("valid");
    let raw: Vec<u8> = (0..=33).chain([255]).collect();
    let mapped = map.map_grey(&raw).expect("all valid ids");
    let expected: Vec<u8> = vec![
        255, 255, 255, 255, 255, 255, 255, 0, 1, 255, 255, 2, 3, 4, 255, 255, 255, 5, 255, 6, 7, 8,
        9, 10, 11, 12, 13, 14, 15, 255, 255, 16, 17, 18, 255,
    ];
    assert_eq!(mapped, expected);
    assert_eq!(map.num_classes(), 19);
    assert_eq!(map.classes()[13], "car");
    assert_eq!(map.class_weights().map(<[f32]>::len), Some(19));
    assert_eq!(map.palette()[0], [128, 64, 128]);
}

#[test]
fn values_outside_the_encoding_are_counted_per_value() {
    let map = LabelMap::new(&LabelEncoding::CityscapesLabelIds, 255).expect("valid");
    let mut raw = vec![7u8; 100];
    raw[..5].fill(40);
    raw[5..7].fill(200);
    let bad = map.map_grey(&raw).expect_err("40 and 200 are not labelIds");
    assert_eq!(
        bad.values,
        vec![(LabelValue::Index(40), 5), (LabelValue::Index(200), 2)]
    );
    assert_eq!((bad.distinct, bad.pixels), (2, 7));
    assert_eq!(
        bad.to_string(),
        "value 40 on 5 pixels, value 200 on 2 pixels (7 pixels in all)"
    );
}

#[test]
fn indices_accept_classes_and_ignore_only() {
    let classes = vec!["bg".to_string(), "cat".to_string(), "dog".to_string()];
    let map = LabelMap::new(&LabelEncoding::indices(classes), 255).expect("valid");
    assert_eq!(
        map.map_grey(&[0, 1, 2, 255]).expect("valid"),
        vec![0, 1, 2, 255]
    );
    let bad = map
        .map_grey(&[0, 3, 3, 254])
        .expect_err("3 and 254 are no class");
    assert_eq!(
        bad.values,
        vec![(LabelValue::Index(3), 2), (LabelValue::Index(254), 1)]
    );
    // A train-id file: 19 classes and 255.
    let train = LabelMap::new(&LabelEncoding::CityscapesTrainIds, 255).expect("valid");
    assert!(train.map_grey(&[0, 18, 255]).is_ok());
    assert!(train.map_grey(&[19]).is_err());
}

#[test]
fn many_bad_values_are_summarised() {
    let map = LabelMap::new(&LabelEncoding::CityscapesTrainIds, 255).expect("valid");
    let raw: Vec<u8> = (19..=254).collect();
    let bad = map.map_grey(&raw).expect_err("all invalid");
    assert_eq!(bad.values.len(), BadValues::MAX_LISTED);
    assert_eq!(bad.distinct, 236);
    assert!(bad.to_string().contains("and 220 more values"), "{bad}");
}

#[test]
fn camvid_colours_map_exactly_and_others_are_ignored() {
    let map = LabelMap::new(&LabelEncoding::CamVidColours, 255).expect("valid");
    assert!(map.wants_colour());
    let mut rgb = Vec::new();
    for colour in CAMVID_PALETTE {
        rgb.extend_from_slice(&colour);
    }
    rgb.extend_from_slice(&[64, 128, 64]); // Animal: not one of the 11
    rgb.extend_from_slice(&[128, 64, 128]); // road again, after a miss
    let mapped = map.map_rgb(&rgb).expect("colour labels");
    assert_eq!(mapped, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255, 6]);
    // A single-channel file given to a colour encoding is reported, not guessed.
    assert!(map.map_grey(&[1, 2]).is_err());
}

#[test]
fn class_lists_that_collide_with_ignore_are_config_errors() {
    let classes: Vec<String> = (0..5).map(|i| i.to_string()).collect();
    let error = LabelMap::new(&LabelEncoding::indices(classes), 3).expect_err("3 < 5");
    assert!(
        error.to_string().contains("collides with ignore_index 3"),
        "{error}"
    );
    let error = LabelMap::new(&LabelEncoding::indices(vec![]), 255).expect_err("no class");
    assert!(error.to_string().contains("classes"), "{error}");
    let error = LabelMap::new(&LabelEncoding::CityscapesLabelIds, 10).expect_err("19 classes");
    assert!(error.to_string().contains("ignore_index"), "{error}");
}

#[test]
fn the_pascal_voc_palette_is_the_official_one() {
    assert_eq!(
        pascal_voc_palette(4),
        vec![[0, 0, 0], [128, 0, 0], [0, 128, 0], [128, 128, 0]]
    );
}

//! Defaults, RON round trips and the refusal of impossible values, each named by its field.

use super::*;

#[test]
fn default_scales_are_the_official_ones() {
    let config = AugmentConfig::default();
    let scales: Vec<f64> = (0..config.scale_steps).map(|k| config.scale(k)).collect();
    assert_eq!(scales.len(), 17);
    assert_eq!(scales[0], 0.5);
    assert_eq!(scales[16], 0.5 + 16.0 / 10.0);
    // int(2048 * s + 0.5) of the official code for s = 0.5 + k/10.
    let longs: Vec<usize> = scales.iter().map(|s| (2048.0 * s + 0.5) as usize).collect();
    assert_eq!(longs[0], 1024);
    assert_eq!(longs[5], 2048);
    assert_eq!(longs[16], 4301);
}

#[test]
fn ron_round_trip_and_partial_configs_fill_defaults() {
    let text = r#"(
        layout: FolderPair(images: "a/{split}/img", masks: "a/{split}/mask", classes: ["bg", "fg"]),
        augment: (crop_height: 512, crop_width: 256),
        train_loader: (batch_size: 2),
    )"#;
    let config: DataConfig = ron::from_str(text).expect("valid RON");
    assert_eq!(config.augment.crop_height, 512);
    assert_eq!(config.augment.base_size, 2048);
    assert_eq!(config.train_loader.batch_size, 2);
    assert_eq!(config.val_loader.batch_size, 1);
    assert!(config
        .loader(Mode::Validation)
        .reads_every_sample_in_order());
    assert!(matches!(config.layout, Layout::FolderPair { ref classes, .. } if classes.len() == 2));
    let printed = ron::to_string(&config).expect("serialisable");
    let again: DataConfig = ron::from_str(&printed).expect("round trip");
    assert_eq!(again, config);
    config.check().expect("valid values");
}

/// A partly written `val_loader` (as `configs/quickstart.ron` has) keeps the validation
/// defaults for the fields it leaves out, not the training loader's `shuffle`/`drop_last`.
#[test]
fn a_partial_val_loader_keeps_the_validation_defaults() {
    let config: DataConfig =
        ron::from_str("(val_loader: (batch_size: 5, num_workers: 2))").expect("valid RON");
    assert_eq!(config.val_loader.batch_size, 5);
    assert!(!config.val_loader.shuffle && !config.val_loader.drop_last);
    let loader = config.loader(Mode::Validation);
    assert!(loader.reads_every_sample_in_order(), "{loader:?}");
    config.check().expect("valid values");
}

#[test]
fn shuffle_or_drop_last_in_validation_is_refused_by_name() {
    for field in ["shuffle", "drop_last"] {
        let text = format!("(val_loader: ({field}: true))");
        let config: DataConfig = ron::from_str(&text).expect("valid RON");
        let error = config.check().expect_err("cannot apply").to_string();
        assert!(error.contains(&format!("val_loader.{field}")), "{error}");
        assert!(error.contains("every sample exactly once"), "{error}");
    }
}

#[test]
fn unknown_fields_are_rejected_with_their_name() {
    let error = ron::from_str::<DataConfig>("(augment: (crop_size: 3))")
        .expect_err("crop_size is not a field");
    assert!(error.to_string().contains("crop_size"), "{error}");
}

#[test]
fn impossible_values_name_their_field() {
    let mut config = DataConfig::default();
    config.augment.std[1] = 0.0;
    let error = config.check().expect_err("zero std").to_string();
    assert!(error.contains("augment.std[1]"), "{error}");
    let mut config = DataConfig::default();
    config.val_loader.batch_size = 0;
    let error = config.check().expect_err("zero batch").to_string();
    assert!(error.contains("val_loader.batch_size"), "{error}");
}

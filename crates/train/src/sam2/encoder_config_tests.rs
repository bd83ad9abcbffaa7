//! Every written form of `model.image_encoder` parses and round-trips through RON and JSON; a
//! wrong one names the field and its line.

use super::*;
use crate::sam2::Sam2ModelConfig;

fn parse(text: &str) -> Result<Sam2ModelConfig, ron::error::SpannedError> {
    ron::de::from_str(text)
}

#[test]
fn every_form_parses_and_round_trips() {
    let custom = "Hiera(size: Custom(embed_dim: 32, num_heads: 1, stages: [1, 2, 3, 1], \
                  global_att_blocks: [5], window_spec: [8, 4, 14, 7], \
                  window_pos_embed_bkg_spatial_size: (7, 7)), drop_path_rate: 0.1)";
    let cases = [
        ("None", ImageEncoderChoice::NONE),
        ("Some((16, 32, 64))", ImageEncoderChoice::cnn([16, 32, 64])),
        (
            "Hiera(size: Tiny)",
            ImageEncoderChoice::hiera(HieraTrunk::Tiny),
        ),
        (
            "Hiera(size: BasePlus, drop_path_rate: 0.1)",
            ImageEncoderChoice::Hiera {
                size: HieraTrunk::BasePlus,
                drop_path_rate: 0.1,
            },
        ),
        (custom, reduced_fixture_encoder(0.1)),
    ];
    for (text, expected) in cases {
        let config =
            parse(&format!("(image_encoder: {text})")).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(config.image_encoder, expected, "{text}");
        // Back through RON (what checkpoints store) and JSON (what --set goes through).
        let pretty = ron::ser::PrettyConfig::new().struct_names(false);
        let ron_text = ron::ser::to_string_pretty(&config, pretty).expect("ron");
        assert_eq!(parse(&ron_text).expect("ron again"), config, "{ron_text}");
        let json = serde_json::to_value(&config).expect("json");
        let back: Sam2ModelConfig = serde_json::from_value(json).expect("from json");
        assert_eq!(back, config);
    }
    // `--set model.image_encoder=None` arrives as JSON null.
    let mut json = serde_json::to_value(Sam2ModelConfig::default()).expect("json");
    json["image_encoder"] = serde_json::Value::Null;
    let back: Sam2ModelConfig = serde_json::from_value(json).expect("null");
    assert!(back.image_encoder.is_none());
    // The official sizes build the official trunks.
    assert_eq!(
        ImageEncoderChoice::hiera(HieraTrunk::Small)
            .hiera_trunk()
            .map(|t| t.stages),
        Some(vec![1, 2, 11, 2])
    );
}

#[test]
fn a_wrong_value_names_the_field_and_its_line() {
    // (value, what the message names); the CLI adds the file and the source line.
    for (bad, named) in [
        ("Hiera(size: Tinny)", "Tinny"),
        ("Hiera(size: Tiny, drop_rate: 0.1)", "drop_rate"),
        ("Hiera(drop_path_rate: 0.1)", "size"),
        ("Some((16, 32))", "length 3"),
        ("Cnn", "model.image_encoder"),
    ] {
        let error = parse(&format!(
            "(\n  image_size: 1024,\n  image_encoder: {bad},\n)"
        ))
        .expect_err(bad);
        assert_eq!(error.position.line, 3, "{bad}: {error}");
        let message = error.to_string();
        assert!(message.contains(named), "{bad}: {message}");
    }
    let config = Sam2ModelConfig {
        image_encoder: ImageEncoderChoice::Hiera {
            size: HieraTrunk::Tiny,
            drop_path_rate: 1.5,
        },
        ..Sam2ModelConfig::default()
    };
    let error = config.check().expect_err("rate ≥ 1").to_string();
    assert!(error.contains("drop_path_rate"), "{error}");
    let config = Sam2ModelConfig {
        image_size: 1040,
        image_encoder: ImageEncoderChoice::hiera(HieraTrunk::Tiny),
        ..Sam2ModelConfig::default()
    };
    let error = config
        .check()
        .expect_err("1040 is no multiple of 32")
        .to_string();
    assert!(
        error.contains("model.image_size") && error.contains("32"),
        "{error}"
    );
}

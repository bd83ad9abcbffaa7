//! The SAM2 binaries refusing what they cannot use before any work: a config error names the
//! file, line, field and value (with a did-you-mean), also in a folder whose name is not ASCII;
//! a bad `--set`, a missing file and a malformed click are named too.

mod common;

use common::{run, text};

const TRAIN: &str = env!("CARGO_BIN_EXE_train-sam2");
const PREDICT: &str = env!("CARGO_BIN_EXE_predict-sam2");

#[test]
fn config_errors_name_file_line_field_and_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("données d'essai").join("bad.ron");
    std::fs::create_dir_all(config.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &config,
        "(\n    model: (image_size: 64, transformer_dm: 64),\n)\n",
    )
    .expect("write");
    let out = run(TRAIN, &[config.to_str().expect("utf8")]);
    let message = text(&out);
    assert!(!out.status.success());
    assert!(message.contains("bad.ron:2:"), "{message}");
    assert!(message.contains("données d'essai"), "{message}");
    assert!(
        message.contains("did you mean `transformer_dim`?"),
        "{message}"
    );

    let out = run(
        TRAIN,
        &["configs/sam2_decoder.ron", "--set", "model.image_size=100"],
    );
    let message = text(&out);
    assert!(!out.status.success());
    assert!(
        message.contains("model.image_size") && message.contains("100"),
        "{message}"
    );

    let out = run(
        TRAIN,
        &[
            "configs/sam2_decoder.ron",
            "--set",
            "prompts.corection_steps=3",
        ],
    );
    assert!(
        text(&out).contains("did you mean `correction_steps`?"),
        "{}",
        text(&out)
    );

    let out = run(
        TRAIN,
        &["configs/sam2_cached.ron", "--set", "data.flip=true"],
    );
    assert!(text(&out).contains("data.flip"), "{}", text(&out));

    let out = run(TRAIN, &["does/not/exist.ron"]);
    assert!(text(&out).contains("exist.ron"), "{}", text(&out));

    let out = run(
        PREDICT,
        &[
            "--checkpoint",
            "x.safetensors",
            "img.png",
            "--points",
            "1,2",
            "--out",
            "o",
        ],
    );
    assert!(text(&out).contains("`1,2`"), "{}", text(&out));
}

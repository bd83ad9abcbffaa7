//! `train-sam2` with SAM 2.1's Hiera encoder as a user runs it, on the reduced model of the
//! fixtures (official key names): a strict `--init-from`, a short fine-tune with the frozen
//! encoder, and cached embeddings written from an official-format file.

mod common;

use common::{run, text, REDUCED_HIERA_EXPERIMENT};
use segburn_models::fixtures::fixture_path;

/// A file of `tests/fixtures/sam2_hiera/` (the model: the formula weights of its listing).
fn fixture(name: &str) -> std::path::PathBuf {
    fixture_path(&format!("sam2_hiera/{name}")).unwrap_or_else(|e| panic!("{e}"))
}

const TRAIN: &str = env!("CARGO_BIN_EXE_train-sam2");

#[test]
fn hiera_init_from_fine_tune_and_cached_embeddings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("réglage fin");
    std::fs::create_dir_all(&root).expect("mkdir");
    let config = root.join("hiera.ron");
    std::fs::write(&config, REDUCED_HIERA_EXPERIMENT).expect("write config");
    let config = config.to_str().expect("utf8").to_string();
    let set_run = format!("train.run_dir={}", root.join("run").display());
    let model = fixture("model.safetensors");
    let subset = fixture("model_subset_official_format.pt");

    // The official container with 13 tensors is not a whole model: refused, naming the file.
    let out = run(
        TRAIN,
        &[&config, "--quiet", "--set", &set_run, "--init-from"]
            .iter()
            .map(|s| s.to_string())
            .chain([subset.display().to_string()])
            .collect::<Vec<_>>(),
    );
    let message = text(&out);
    assert!(!out.status.success(), "{message}");
    assert!(
        message.contains("model_subset_official_format.pt")
            && message.contains("missing from the file"),
        "{message}"
    );

    // The whole model under official keys: loaded strictly, video keys not used, one step
    // with the encoder frozen.
    let out = run(
        TRAIN,
        &[
            config.as_str(),
            "--quiet",
            "--set",
            &set_run,
            "--set",
            "model.freeze_image_encoder=true",
            "--init-from",
            model.to_str().expect("utf8"),
        ],
    );
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    assert!(message.contains("not used"), "{message}");
    assert!(message.contains("a frozen Hiera encoder"), "{message}");
    assert!(message.contains("finished at step 1"), "{message}");

    // Embeddings written with the encoder of that file, then the heads trained on them.
    let embeddings = root.join("emb").join("{split}");
    let set_embeddings = format!("data.embeddings=Some(\"{}\")", embeddings.display());
    let cached = [
        config.as_str(),
        "--quiet",
        "--set",
        &set_embeddings,
        "--set",
        "data.flip=false",
    ];
    let model_arg = model.to_str().expect("utf8");
    let out = run(
        TRAIN,
        &[&cached[..], &["--write-embeddings", "--encoder", model_arg]].concat(),
    );
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    let file = root.join("emb/val/coldharbour_000000_000019.safetensors");
    assert!(file.is_file(), "{message}");
    let cached_run = format!("train.run_dir={}", root.join("cached").display());
    let out = run(
        TRAIN,
        &[
            &cached[..],
            &["--set", "model.image_encoder=None", "--set", &cached_run],
        ]
        .concat(),
    );
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    assert!(
        message.contains("no encoder (cached embeddings)"),
        "{message}"
    );
}

//! The SAM2 binaries as a user runs them: a short training with resume, eval, predict with every
//! checkpoint form and with checked prompts, and cached embeddings, in a folder whose name is
//! not ASCII.

mod common;

use std::path::Path;

use common::{run, text};

const TRAIN: &str = env!("CARGO_BIN_EXE_train-sam2");
const EVAL: &str = env!("CARGO_BIN_EXE_eval-sam2");
const PREDICT: &str = env!("CARGO_BIN_EXE_predict-sam2");

#[test]
fn train_resume_eval_predict_and_cached_embeddings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("données d'essai").join("数据");
    let run_dir = root.join("run");
    let set_run = format!("train.run_dir={}", run_dir.display());
    let base = [
        "configs/sam2_decoder.ron",
        "--quiet",
        "--set",
        &set_run,
        "--set",
        "train.checkpoint_every_steps=None",
    ];

    let out = run(
        TRAIN,
        &[
            &base[..],
            &[
                "--set",
                "train.max_steps=3",
                "--set",
                "train.validate_at_end=false",
            ],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = run(
        TRAIN,
        &[&base[..], &["--set", "train.max_steps=5", "--resume"]].concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let message = text(&out);
    assert!(
        message.contains("resumed from") && message.contains("at step 3"),
        "{message}"
    );
    assert!(message.contains("1 box"), "{message}");
    let checkpoint = run_dir
        .join("checkpoints")
        .join("step_00000005.safetensors");
    assert!(checkpoint.is_file(), "{message}");

    // A resume that changes the model is refused with the differences (the checkpoint named
    // by the run's `latest` pointer).
    let latest = run_dir.join("checkpoints").join("latest");
    let out = run(
        TRAIN,
        &[
            &base[..],
            &[
                "--set",
                "train.max_steps=6",
                "--set",
                "model.mlp_dim=64",
                "--resume",
                latest.to_str().expect("utf8"),
            ],
        ]
        .concat(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("model.mlp_dim"), "{}", text(&out));

    let checkpoint_arg = checkpoint.to_str().expect("utf8");
    let out = run(
        EVAL,
        &[
            "configs/sam2_decoder.ron",
            "--checkpoint",
            checkpoint_arg,
            "--corrections",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("1 click + 1 correction(s)"),
        "{}",
        text(&out)
    );

    let image =
        "datasets/sample/leftImg8bit/val/coldharbour/coldharbour_000000_000019_leftImg8bit.png";
    let out_dir = root.join("prédictions");
    let out_arg = out_dir.to_str().expect("utf8");
    let out = run(
        PREDICT,
        &[
            "--checkpoint",
            checkpoint_arg,
            image,
            "--points",
            "100,200,1;300,50,0",
            "--box",
            "50,150,250,250",
            "--out",
            out_arg,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    for suffix in ["_mask.png", "_overlay.png"] {
        let file = out_dir.join(format!("coldharbour_000000_000019_leftImg8bit{suffix}"));
        assert!(file.is_file(), "{suffix}: {}", text(&out));
    }
    checkpoint_forms_name_the_same_checkpoint(&run_dir, &checkpoint, image, &root);
    prompts_are_checked_against_the_image(checkpoint_arg, image, &root);

    // Cached embeddings from the trained encoder, then a decoder trained on them alone.
    let embeddings = root.join("emb").join("{split}");
    let set_embeddings = format!("data.embeddings=Some(\"{}\")", embeddings.display());
    let cached_run = format!("train.run_dir={}", root.join("cached").display());
    let cached = [
        "configs/sam2_cached.ron",
        "--quiet",
        "--set",
        &set_embeddings,
        "--set",
        &cached_run,
    ];
    let out = run(
        TRAIN,
        &[
            &cached[..],
            // The encoder named by its run directory: the newest checkpoint, step 5.
            &[
                "--write-embeddings",
                "--encoder",
                run_dir.to_str().expect("utf8"),
            ],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        root.join("emb/val/coldharbour_000000_000019.safetensors")
            .is_file(),
        "{}",
        text(&out)
    );
    let out = run(
        TRAIN,
        &[&cached[..], &["--set", "train.max_steps=2"]].concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("no encoder (cached embeddings)"),
        "{}",
        text(&out)
    );
}

/// `eval-sam2` and `predict-sam2` accept a run directory, its `checkpoints/` folder and the
/// `latest` / `best` pointers, and reach the same checkpoint (step 5) as its file does.
fn checkpoint_forms_name_the_same_checkpoint(
    run_dir: &Path,
    checkpoint: &Path,
    image: &str,
    root: &Path,
) {
    let checkpoints = run_dir.join("checkpoints");
    let forms = [
        checkpoint.to_path_buf(),
        run_dir.to_path_buf(),
        checkpoints.clone(),
        checkpoints.join("latest"),
        checkpoints.join("best"),
    ];
    let out_dir = root.join("formes");
    let mask = out_dir.join("coldharbour_000000_000019_leftImg8bit_mask.png");
    let mut reports = Vec::new();
    let mut masks = Vec::new();
    for form in &forms {
        let form = form.to_str().expect("utf8");
        let out = run(
            EVAL,
            &[
                "configs/sam2_decoder.ron",
                "--checkpoint",
                form,
                "--corrections",
                "0",
                "--set",
                "data.eval_objects_per_image=1",
            ],
        );
        assert!(out.status.success(), "{form}: {}", text(&out));
        // `<checkpoint> split `val`, <report>`: the resolved file, then the numbers.
        let message = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            message.contains(&format!("{} split", checkpoint.display())),
            "{form}: {message}"
        );
        reports.push(message);

        let out_arg = out_dir.to_str().expect("utf8");
        let out = run(
            PREDICT,
            &[
                "--checkpoint",
                form,
                image,
                "--box",
                "50,150,250,250",
                "--out",
                out_arg,
            ],
        );
        assert!(out.status.success(), "{form}: {}", text(&out));
        masks.push(std::fs::read(&mask).expect("mask"));
    }
    assert!(reports.iter().all(|r| r == &reports[0]), "{reports:#?}");
    assert!(masks.iter().all(|m| m == &masks[0]));
}

/// Bad prompts are refused with the value and the image size; a box overhanging the border
/// is clipped with a warning; I/O errors name their cause once.
fn prompts_are_checked_against_the_image(checkpoint: &str, image: &str, root: &Path) {
    let out_dir = root.join("invites");
    let out_arg = out_dir.to_str().expect("utf8");
    let predict = |prompt: &[&str]| {
        run(
            PREDICT,
            &[
                &["--checkpoint", checkpoint, image, "--out", out_arg],
                prompt,
            ]
            .concat(),
        )
    };
    for (prompt, expected) in [
        (
            ["--points", "600,10,1"],
            "click 600,10 lies outside the 512×256 image",
        ),
        (
            ["--points", "-3,10,1"],
            "click -3,10 lies outside the 512×256 image",
        ),
        (
            ["--box", "600,10,700,100"],
            "box 600,10,700,100 lies outside the 512×256 image",
        ),
        (
            ["--box", "300,50,100,200"],
            "box 300,50,100,200 is inverted",
        ),
        (["--box", "100,50,100,200"], "box 100,50,100,200 is empty"),
        (["--box", "1,2,3"], "`1,2,3` is not a box"),
        (["--points", "10,20,1;5,5"], "`5,5` is not a click"),
    ] {
        let out = predict(&prompt);
        assert!(!out.status.success(), "{prompt:?}: {}", text(&out));
        assert!(text(&out).contains(expected), "{prompt:?}: {}", text(&out));
    }
    assert!(!out_dir.exists(), "a refused prompt writes nothing");

    for (given, clipped) in [
        ("100,180,5600,300", "100,180,512,256"),
        ("-0.5,10,200,100", "0,10,200,100"),
    ] {
        let out = predict(&["--box", given]);
        assert!(out.status.success(), "{}", text(&out));
        let warning =
            format!("warning: box {given} overhangs the 512×256 image; clipped to {clipped}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&warning),
            "{}",
            text(&out)
        );
    }

    // A folder given as the image: the OS's reason once.
    let folder = root.to_str().expect("utf8");
    let out = run(
        PREDICT,
        &[
            "--checkpoint",
            checkpoint,
            folder,
            "--points",
            "1,1,1",
            "--out",
            out_arg,
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        text(&out).matches("Is a directory (os error 21)").count(),
        1,
        "{}",
        text(&out)
    );
    let out = run(
        EVAL,
        &[
            "configs/sam2_decoder.ron",
            "--checkpoint",
            checkpoint,
            "--corrections",
            "0",
            "--set",
            "data.eval_objects_per_image=1",
            "--json",
            folder,
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        text(&out).matches("Is a directory (os error 21)").count(),
        1,
        "{}",
        text(&out)
    );
}

//! The SAM2 binaries as a user runs them: config errors, a short training with resume, eval,
//! predict and cached embeddings, in a folder whose name is not ASCII.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(binary: &str, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

const TRAIN: &str = env!("CARGO_BIN_EXE_train-sam2");
const EVAL: &str = env!("CARGO_BIN_EXE_eval-sam2");
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

/// `device: CpuReplicas(2)` and `train.grad_accum: 2` take the same steps through the binary
/// (bit for bit), a resume that changes the micro-batches per step is refused, and a field
/// that moved out of the shared `train` section says where it lives now.
#[test]
fn replicas_and_accumulation_take_the_same_steps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run_dir = |name: &str| dir.path().join("données d'essai").join(name);
    let train = |name: &str, extra: &[&str]| {
        let run_dir = format!("train.run_dir={}", run_dir(name).display());
        let mut args = vec![
            "configs/sam2_decoder.ron",
            "--quiet",
            "--set",
            "train.max_steps=2",
            "--set",
            "train.validate_at_end=false",
            "--set",
            &run_dir,
        ];
        args.extend_from_slice(extra);
        run(TRAIN, &args)
    };
    let replicas = train("replicas", &["--set", "device=CpuReplicas(2)"]);
    assert!(replicas.status.success(), "{}", text(&replicas));
    assert!(
        text(&replicas).contains("on each of 2 device(s) as data-parallel replicas"),
        "{}",
        text(&replicas)
    );
    let accumulated = train("accumulated", &["--set", "train.grad_accum=2"]);
    assert!(accumulated.status.success(), "{}", text(&accumulated));
    let model = |name: &str| {
        let path = run_dir(name)
            .join("checkpoints")
            .join("step_00000002.safetensors");
        segburn_train::checkpoint::load_checkpoint(&path)
            .expect("checkpoint")
            .model
    };
    let (a, b) = (model("replicas"), model("accumulated"));
    assert_eq!(a.len(), b.len());
    for (key, value) in &a {
        assert_eq!(value.as_bytes(), b[key].as_bytes(), "{key} differs");
    }

    // One device without accumulation takes 1 micro-batch per step, not 2.
    let narrowed = train("replicas", &["--set", "train.max_steps=4", "--resume"]);
    assert!(!narrowed.status.success());
    assert!(
        text(&narrowed).contains("micro-batches per step (train.grad_accum × devices): 2 -> 1"),
        "{}",
        text(&narrowed)
    );

    let config = dir.path().join("old.ron");
    std::fs::write(
        &config,
        "(\n    train: (lr: 0.001, eval_corrections: 2),\n)\n",
    )
    .expect("write");
    let old = run(TRAIN, &[config.to_str().expect("utf8")]);
    assert!(!old.status.success());
    assert!(
        text(&old).contains("`eval_corrections` has moved to `prompts.eval_corrections`"),
        "{}",
        text(&old)
    );
}

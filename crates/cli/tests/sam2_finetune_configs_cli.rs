//! The shipped SAM 2.1 fine-tuning configs as a user runs them: `sam2.1_hiera_t_finetune.ron`
//! with the encoder frozen and trainable (layer decay), and `sam2.1_hiera_t_cached.ron`, each
//! initialised from an official-format checkpoint (the reduced fixture model under official
//! keys and the `model.` wrapper), trained a few steps, saved, resumed to a later step and
//! evaluated with `eval-sam2`, in a run folder whose name has a space and a non-ASCII letter.
//!
//! Only what must shrink is overridden (input size, the Hiera trunk and head width of the
//! fixture, run length, checkpoint cadence, paths); optimizer, learning rates, layer decay,
//! gradient clipping, schedule, prompts and drop path are the files' own, and the test checks
//! that the run's saved experiment differs from the file in nothing else.

mod common;

use std::path::{Path, PathBuf};

use common::official::official_files;
use common::{run, text, workspace};
use segburn::experiment::file::read_experiment;
use segburn::experiment::Sam2Experiment;
use segburn_models::fixtures::max_abs_diff;
use segburn_models::tensor_file::{read_safetensors, NamedTensors};
use segburn_train::checkpoint::load_checkpoint;
use serde_json::Value;

const TRAIN: &str = env!("CARGO_BIN_EXE_train-sam2");
const EVAL: &str = env!("CARGO_BIN_EXE_eval-sam2");

const FINETUNE: &str = "configs/sam2.1_hiera_t_finetune.ron";
const CACHED: &str = "configs/sam2.1_hiera_t_cached.ron";

/// The reduced Hiera trunk of the fixture model (`sam2_hiera_config()`) in `--set`'s JSON form.
const REDUCED_TRUNK: &str = r#"{"Custom":{"embed_dim":32,"num_heads":1,"stages":[1,2,3,1],
    "global_att_blocks":[5],"window_spec":[8,4,14,7],"window_pos_embed_bkg_spatial_size":[7,7]}}"#;

/// Steps of the first run, and the step the resumed run stops at.
const FIRST_STEPS: u64 = 2;
const RESUMED_STEPS: u64 = 4;

/// A temporary folder with the official-format checkpoint and the `runs ü/` folder.
struct Workspace {
    _dir: tempfile::TempDir,
    checkpoint: PathBuf,
    runs: PathBuf,
}

fn workspace_with_checkpoint() -> Workspace {
    let dir = tempfile::tempdir().expect("tempdir");
    let (checkpoint, _) = official_files(dir.path());
    let runs = dir.path().join("runs ü");
    Workspace {
        _dir: dir,
        checkpoint,
        runs,
    }
}

/// The overrides every run of `name` takes: 128 px inputs, the fixture's 64-wide heads, a
/// checkpoint every 2 steps, and its run folder. (Batch size 1 and the log cadence are the
/// files' own: the last step is always logged.)
fn shrink(runs: &Path, name: &str) -> Vec<String> {
    vec![
        "model.image_size=128".into(),
        "model.transformer_dim=64".into(),
        "train.checkpoint_every_steps=Some(2)".into(),
        format!("train.run_dir={}", runs.join(name).display()),
    ]
}

/// The paths of the experiment (as JSON) that [`shrink`] changes, plus the data root the
/// binaries make absolute.
const SHRUNK_PATHS: [&str; 6] = [
    "model.image_size",
    "model.transformer_dim",
    "train.checkpoint_every_steps",
    "train.run_dir",
    "train.max_steps",
    "data.source.SemanticComponents.layout.Cityscapes.root",
];

/// `--set` for each override.
fn sets(overrides: &[String]) -> Vec<String> {
    overrides
        .iter()
        .flat_map(|o| ["--set".to_string(), o.clone()])
        .collect()
}

#[test]
fn finetune_config_with_the_encoder_frozen() {
    let ws = workspace_with_checkpoint();
    let mut overrides = shrink(&ws.runs, "frozen");
    overrides.push(format!("model.image_encoder.Hiera.size={REDUCED_TRUNK}"));
    overrides.push("model.freeze_image_encoder=true".into());
    let checkpoint = train_resume_and_evaluate(
        FINETUNE,
        &overrides,
        &ws.checkpoint,
        "a frozen Hiera encoder",
        &[
            "model.image_encoder.Hiera.size",
            "model.freeze_image_encoder",
        ],
    );
    // The encoder is the official file's bit for bit; the heads trained.
    let official = official_tensors(&ws.checkpoint);
    let (moved, total) = changed(&official, &checkpoint, "image_encoder.");
    assert!(
        total > 0 && moved == 0,
        "{moved} of {total} encoder tensors moved"
    );
    let (moved, total) = changed(&official, &checkpoint, "sam_mask_decoder.");
    assert!(moved > 0, "{moved} of {total} decoder tensors moved");
}

#[test]
fn finetune_config_trainable_with_layer_decay() {
    let ws = workspace_with_checkpoint();
    let mut overrides = shrink(&ws.runs, "trainable");
    overrides.push(format!("model.image_encoder.Hiera.size={REDUCED_TRUNK}"));
    let checkpoint = train_resume_and_evaluate(
        FINETUNE,
        &overrides,
        &ws.checkpoint,
        "the Hiera encoder, end to end",
        &["model.image_encoder.Hiera.size"],
    );
    let official = official_tensors(&ws.checkpoint);
    let (moved, total) = changed(&official, &checkpoint, "image_encoder.");
    assert!(
        moved > total / 2,
        "{moved} of {total} encoder tensors moved"
    );
    // The patch embedding learns at lr × 0.6 × 0.9^(7 blocks + 1). Its bias has no weight
    // decay, and a bias-corrected AdamW step moves a weight by at most its rate (m̂ / √v̂ ≤
    // 1.007 over the first 4 steps), so 4 steps stay within 5.2e-6, where the heads' rate would
    // allow 2e-5; with gradients of one sign they take most of it (5.09e-6 measured).
    let file: Sam2Experiment = read_experiment(&workspace().join(FINETUNE), &[]).expect("file");
    let decay = file.model.image_encoder_layer_decay.expect("layer decay");
    let rate = file.train.lr * file.model.image_encoder_lr_mult * decay.powi(8);
    let key = "image_encoder.trunk.patch_embed.proj.bias";
    let moved = max_abs_difference(&official[key], &checkpoint[key]);
    let bound = RESUMED_STEPS as f64 * 1.01 * rate;
    assert!(
        moved >= 0.5 * bound && moved <= bound,
        "{key} moved {moved:e}, not within [{:e}, {bound:e}]",
        0.5 * bound
    );
}

#[test]
fn cached_config_on_embeddings_of_the_official_encoder() {
    let ws = workspace_with_checkpoint();
    let embeddings = ws.runs.join("embeddings").join("{split}");
    let mut overrides = shrink(&ws.runs, "cached");
    overrides.push(format!(
        "data.embeddings=Some(\"{}\")",
        embeddings.display()
    ));
    // The reduced trunk is none of the official sizes, so it is written out for the encoder
    // run (a real sam2.1_hiera_tiny.pt is recognised from its blocks).
    let encoder = format!(r#"model.image_encoder={{"Hiera":{{"size":{REDUCED_TRUNK}}}}}"#);
    let out = run(
        TRAIN,
        &[
            &[CACHED, "--quiet"].map(String::from)[..],
            &sets(&[&overrides[..], &[encoder]].concat()),
            &["--write-embeddings".into(), "--encoder".into()],
            &[ws.checkpoint.display().to_string()],
        ]
        .concat(),
    );
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    assert!(message.contains("train: 48 embeddings"), "{message}");
    let val = ws
        .runs
        .join("embeddings/val/coldharbour_000000_000019.safetensors");
    assert!(val.is_file(), "{message}");

    let checkpoint = train_resume_and_evaluate(
        CACHED,
        &overrides,
        &ws.checkpoint,
        "no encoder (cached embeddings)",
        &["data.embeddings"],
    );
    assert!(!checkpoint.keys().any(|k| k.starts_with("image_encoder.")));
    let official = official_tensors(&ws.checkpoint);
    let (moved, total) = changed(&official, &checkpoint, "sam_mask_decoder.");
    assert!(moved > 0, "{moved} of {total} decoder tensors moved");
}

/// Trains `config` with `overrides` for [`FIRST_STEPS`] from `init_from`, resumes to
/// [`RESUMED_STEPS`] and evaluates the run with `eval-sam2`; checks the checkpoints, the
/// continued step count, the finite losses, that the saved experiment is the file's but for
/// [`SHRUNK_PATHS`] and `more_changed`, and that `eval-sam2` repeats the run's final
/// validation. Returns the last checkpoint's model tensors.
fn train_resume_and_evaluate(
    config: &str,
    overrides: &[String],
    init_from: &Path,
    encoder: &str,
    more_changed: &[&str],
) -> NamedTensors {
    let base = [&[config, "--quiet"].map(String::from)[..], &sets(overrides)].concat();
    let steps = |n: u64| sets(&[format!("train.max_steps={n}")]);
    let init = ["--init-from".to_string(), init_from.display().to_string()];
    let out = run(TRAIN, &[&base[..], &steps(FIRST_STEPS), &init].concat());
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    assert!(message.contains(encoder), "{message}");
    assert!(message.contains("loaded:"), "{message}");
    assert!(
        message.contains(&format!("finished at step {FIRST_STEPS}")),
        "{message}"
    );
    let run_dir = PathBuf::from(
        overrides
            .iter()
            .find_map(|o| o.strip_prefix("train.run_dir="))
            .expect("run_dir"),
    );
    let checkpoints = run_dir.join("checkpoints");
    let first = checkpoints.join(format!("step_{FIRST_STEPS:08}.safetensors"));
    assert!(first.is_file(), "{message}");
    assert!(checkpoints.join("latest").exists(), "{message}");

    let out = run(
        TRAIN,
        &[&base[..], &steps(RESUMED_STEPS), &["--resume".into()]].concat(),
    );
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    assert!(
        message.contains("resumed from") && message.contains(&format!("at step {FIRST_STEPS}")),
        "{message}"
    );
    assert!(
        message.contains(&format!("finished at step {RESUMED_STEPS}")),
        "{message}"
    );
    let last = checkpoints.join(format!("step_{RESUMED_STEPS:08}.safetensors"));
    assert!(last.is_file(), "{message}");

    // One train and one validation row at the end of each run, the losses finite.
    let rows = metrics(&run_dir);
    let at = |kind: &str| -> Vec<u64> {
        let rows = rows.iter().filter(|r| r["kind"] == kind);
        rows.map(|r| r["step"].as_u64().expect("step")).collect()
    };
    assert_eq!(at("train"), [FIRST_STEPS, RESUMED_STEPS], "{rows:#?}");
    assert_eq!(at("val"), [FIRST_STEPS, RESUMED_STEPS], "{rows:#?}");
    for row in rows.iter().filter(|r| r["kind"] == "train") {
        for name in ["loss", "loss_mask", "loss_dice", "loss_iou", "loss_class"] {
            let value = row[name].as_f64().unwrap_or(f64::NAN);
            assert!(value.is_finite(), "{name}: {row}");
        }
    }

    let saved = load_checkpoint(&last).unwrap_or_else(|e| panic!("{e}"));
    let saved_experiment: Sam2Experiment =
        ron::de::from_str(&saved.meta.config).expect("the saved experiment");
    let file: Sam2Experiment = read_experiment(&workspace().join(config), &[]).expect("file");
    let mut differences = Vec::new();
    differing_paths(&json(&file), &json(&saved_experiment), "", &mut differences);
    let allowed: Vec<&str> = SHRUNK_PATHS.iter().chain(more_changed).copied().collect();
    assert!(
        differences.iter().all(|d| allowed.contains(&d.as_str())),
        "the run changed more than the overrides: {differences:?}"
    );
    assert!(
        more_changed
            .iter()
            .all(|p| differences.iter().any(|d| d == p)),
        "{differences:?}"
    );

    let json_report = run_dir.join("eval ü.json");
    let out = run(
        EVAL,
        &[
            &[config.to_string(), "--checkpoint".into()][..],
            &[run_dir.display().to_string(), "--json".into()],
            &[json_report.display().to_string()],
            &sets(overrides),
        ]
        .concat(),
    );
    let message = text(&out);
    assert!(out.status.success(), "{message}");
    assert!(
        message.contains(&format!(
            "{} split `val`, mean mask IoU over",
            last.display()
        )),
        "{message}"
    );
    let one_click = message
        .lines()
        .find_map(|l| l.trim().strip_prefix("1 click "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    assert!((0.0..=1.0).contains(&one_click), "{message}");
    // The saved checkpoint is the model the run validated last.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_report).expect("report"))
            .expect("JSON report");
    let validation = rows.iter().rfind(|r| r["kind"] == "val").expect("val row");
    for (ours, theirs) in [("one_click", "iou_one_click"), ("one_box", "iou_one_box")] {
        let (a, b) = (report[ours].as_f64(), validation[theirs].as_f64());
        assert!(
            a.zip(b).is_some_and(|(a, b)| (a - b).abs() < 1e-6),
            "{ours}: {report} vs {validation}"
        );
    }
    saved.model
}

/// The rows of the run's `metrics.jsonl`.
fn metrics(run_dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(run_dir.join("metrics.jsonl")).expect("metrics.jsonl");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn json(experiment: &Sam2Experiment) -> Value {
    serde_json::to_value(experiment).expect("experiment as JSON")
}

/// The dotted paths at which `a` and `b` differ (a value that differs in kind is one path).
fn differing_paths(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                let missing = Value::Null;
                let (x, y) = (a.get(key), b.get(key));
                differing_paths(x.unwrap_or(&missing), y.unwrap_or(&missing), &child, out);
            }
        }
        (a, b) if a != b => out.push(path.to_string()),
        _ => {}
    }
}

/// The official-format checkpoint's tensors, `model.` wrapper removed.
fn official_tensors(path: &Path) -> NamedTensors {
    read_safetensors(path)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(key, data)| (key.strip_prefix("model.").unwrap_or(&key).to_string(), data))
        .collect()
}

/// How many of `after`'s tensors under `prefix` differ from `before`'s, of how many.
fn changed(before: &NamedTensors, after: &NamedTensors, prefix: &str) -> (usize, usize) {
    let keys: Vec<&String> = after.keys().filter(|k| k.starts_with(prefix)).collect();
    let moved = keys
        .iter()
        .filter(|k| max_abs_difference(&before[k.as_str()], &after[k.as_str()]) > 0.0)
        .count();
    (moved, keys.len())
}

/// The largest |a − b| (infinite on NaN or infinity: a NaN weight counts as moved).
fn max_abs_difference(a: &burn::tensor::TensorData, b: &burn::tensor::TensorData) -> f64 {
    let values = |t: &burn::tensor::TensorData| -> Vec<f64> {
        let floats = t.to_vec::<f32>().expect("f32 tensor");
        floats.into_iter().map(f64::from).collect()
    };
    max_abs_diff(&values(a), &values(b))
}

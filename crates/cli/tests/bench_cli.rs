//! The `bench` binary's suite in smoke mode (tiny sizes, one run each) so that its code paths
//! cannot rot: the table, the JSON file, `--compare`, and the errors for bad flags.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .current_dir(workspace())
        .args(args)
        .output()
        .expect("the bench binary runs")
}

#[test]
fn smoke_suite_writes_json_and_compares_with_it() {
    let temp = tempfile::tempdir().unwrap();
    let json = temp.path().join("before.json");
    let json = json.to_str().unwrap();
    let first = bench(&["--smoke", "--workloads", "eval,sam2,loader", "--json", json]);
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(text.contains("eval       PIDNet-S"), "{text}");
    assert!(text.contains("loader"), "{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(report["smoke"], true);
    assert_eq!(report["rows"].as_array().unwrap().len(), 4);

    let second = bench(&["--smoke", "--workloads", "eval", "--compare", json]);
    let text = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{text}");
    assert!(text.contains("ratio = new / old"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("eval/PIDNet-S/f32/1x3x64x128") && l.ends_with('x')),
        "{text}"
    );
}

#[test]
fn smoke_hiera_workload_has_the_forward_and_both_finetune_rows() {
    let temp = tempfile::tempdir().unwrap();
    let json = temp.path().join("hiera.json");
    let json = json.to_str().unwrap();
    let output = bench(&[
        "--smoke",
        "--workloads",
        "hiera",
        "--hiera-sizes",
        "t",
        "--json",
        json,
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "hiera/Hiera-T encoder-fwd/f32/1x3x64x64",
            "hiera/Hiera-T finetune-frozen/f32/1x3x64x64",
            "hiera/Hiera-T finetune-full/f32/1x3x64x64"
        ]
    );
    for row in rows {
        assert!(row["median_ms"].as_f64().unwrap() > 0.0, "{row}");
        if cfg!(target_os = "linux") {
            assert!(row["peak_memory_bytes"].as_u64().unwrap() > 0, "{row}");
        }
    }
}

#[test]
fn bad_flags_are_one_clear_error() {
    for (args, expected) in [
        (&["--crop", "500,500"][..], "multiples of 8"),
        (&["--precision", "f8"], "use f32, bf16 or f16"),
        (&["--hiera-sizes", "xl"], "use t, s, b+ or l"),
        (
            &["--compare", "/nonexistent/old.json", "--smoke"],
            "/nonexistent/old.json",
        ),
    ] {
        let output = bench(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected) && !stderr.contains("backtrace"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn the_original_pidnet_subcommand_still_works() {
    let output = bench(&["pidnet", "--smoke", "--reps", "1", "--warmups", "0"]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("train step"));
    let output = bench(&["pidnet", "--smoke", "--reps", "0"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--reps 0"));
}

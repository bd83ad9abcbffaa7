//! Developer tasks: `cargo xtask <task>` (or `cargo run -p xtask -- <task>`).
//!
//! * `make-sample [OUT [VOS_OUT]]`: regenerate the bundled sample datasets: street scenes in the
//!   Cityscapes layout (default `datasets/sample`) and videos in the DAVIS layout (default
//!   `datasets/sample_vos`).
//! * `bench-loader [--images N] [--workers N]`: loader throughput on 2048x1024 PNGs.
//! * `bench-kernels`: segburn's CPU kernels against the Burn ops they replace.
//! * `chaos [--runs N] [--seed S] [--steps K]`: SIGKILL / Ctrl-C / full-disk fault injection
//!   against `train` and `train-sam2`, resumed runs compared bit for bit.

mod bench_jpeg;
mod bench_kernels;
mod bench_loader;
mod chaos;
mod make_sample;
mod png_file;
mod scene;
mod vos_sample;
mod workspace;

use std::path::PathBuf;

use workspace::workspace_root;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first() else {
        anyhow::bail!(
            "usage: cargo xtask <make-sample [OUT [VOS_OUT]] | bench-loader [--images N] | bench-kernels | chaos [--runs N]>"
        );
    };
    let rest = &args[1..];
    match task.as_str() {
        "make-sample" => {
            let out = rest
                .first()
                .map_or_else(|| workspace_root().join("datasets/sample"), PathBuf::from);
            make_sample::run(&out)?;
            let vos_out = rest.get(1).map_or_else(
                || workspace_root().join("datasets/sample_vos"),
                PathBuf::from,
            );
            let bytes = vos_sample::run(&vos_out)?;
            println!(
                "wrote the VOS sample ({:.2} MB) to {}",
                bytes as f64 / 1e6,
                vos_out.display()
            );
            Ok(())
        }
        "bench-loader" => bench_loader::run(rest),
        "bench-kernels" => bench_kernels::run(),
        "chaos" => chaos::run(rest),
        other => anyhow::bail!(
            "unknown task `{other}`; tasks: make-sample, bench-loader, bench-kernels, chaos"
        ),
    }
}

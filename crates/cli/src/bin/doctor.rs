//! `doctor [EXPERIMENT] [--set key=value]… [--json FILE] [--skip-kernels] [--fixtures DIR]`: checks what this
//! machine can run. Exit code 1 when something needed is broken.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use segburn::doctor::{diagnose, render, DoctorOptions};

#[derive(Parser)]
#[command(
    name = "doctor",
    about = "Check this machine for segburn: system, backends and CUDA, a kernel sanity check per device, half precision, checkpoint and dataset folders"
)]
struct Args {
    /// An experiment file: check its run directory, dataset, device and precision
    /// (default: the folders checkpoints/ and datasets/, on the CPU).
    experiment: Option<PathBuf>,
    /// Override a field of the experiment (JSON values): --set 'device={"Cuda":0}' (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Skip the kernel and half-precision checks.
    #[arg(long)]
    skip_kernels: bool,
    /// Also run PIDNet-S and SAM2 on each device against the official outputs in this folder
    /// (the shared fixtures: pidnet_s/, sam2/).
    #[arg(long, value_name = "DIR")]
    fixtures: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    let report = diagnose(&DoctorOptions {
        experiment: args.experiment,
        overrides: args.set,
        skip_kernels: args.skip_kernels,
        fixtures: args.fixtures,
    });
    print!("{}", render(&report));
    if let Some(path) = &args.json {
        let written = serde_json::to_string_pretty(&report)
            .map_err(anyhow::Error::from)
            .and_then(|text| std::fs::write(path, text).map_err(anyhow::Error::from))
            .with_context(|| format!("cannot write {}", path.display()));
        if let Err(error) = written {
            // 2, not 1: the checks ran; only their report could not be saved.
            segburn::error_chain::exit_with(&error, 2);
        }
    }
    std::process::exit(report.exit_code());
}

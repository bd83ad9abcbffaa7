//! `bench`: prints timings of segburn's workloads (median of N after warm-ups) and writes JSON.
//!
//! ```text
//! cargo run --release --bin bench -- --sizes s,m --precision f32,bf16   # the suite (docs/benchmarks.md)
//! cargo run --release --bin bench -- --smoke                            # the suite at tiny sizes
//! cargo run --release --bin bench -- pidnet            # PIDNet-S eval 1×3×512×1024, train step 2×3×256×512
//! cargo run --release --bin bench -- pidnet --size l --reps 3 --warmups 1
//! cargo run --release --bin bench -- pidnet --smoke    # tiny sizes, one run: checks the code path
//! cargo run --release --bin bench -- eval --sizes s,m,l # eval FPS at 1×3×1024×2048 (whole, f32)
//! ```

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    about = "Benchmarks that print numbers (median of N runs after warm-ups)",
    args_conflicts_with_subcommands = true
)]
struct Args {
    /// Without a subcommand: the suite (PIDNet train/eval, SAM2, loader).
    #[command(subcommand)]
    workload: Option<Workload>,
    #[command(flatten)]
    suite: segburn::bench::suite::SuiteArgs,
    /// Tiny sizes and a single run: exercises the code path only.
    #[arg(long, global = true)]
    smoke: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, global = true)]
    json: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum Workload {
    /// PIDNet eval forward and one full training step on the CPU (Flex).
    Pidnet {
        /// s, m or l.
        #[arg(long, default_value = "s")]
        size: String,
        /// Timed runs of each workload (the median is reported).
        #[arg(long, default_value_t = segburn::bench::subcommands::PIDNET_REPEATS.reps)]
        reps: usize,
        /// Untimed runs before timing.
        #[arg(long, default_value_t = segburn::bench::subcommands::PIDNET_REPEATS.warmups)]
        warmups: usize,
    },
    /// Inference FPS as `eval` runs it (whole mode, f32) at 1×3×1024×2048 on the CPU (Flex).
    Eval {
        /// Comma-separated sizes: s, m, l.
        #[arg(long, default_value = "s,m,l")]
        sizes: String,
    },
}

fn main() {
    segburn_train::compute_threads::configure_malloc();
    // One clear paragraph for a user mistake, never a backtrace.
    segburn::error_chain::finish(run(&Args::parse()));
}

fn run(args: &Args) -> anyhow::Result<()> {
    let Some(workload) = &args.workload else {
        return segburn::bench::suite::run_command(&args.suite, args.smoke, args.json.as_deref());
    };
    let report = match workload {
        Workload::Pidnet {
            size,
            reps,
            warmups,
        } => {
            let repeats = segburn::bench::workloads::Repeats {
                warmups: *warmups,
                reps: *reps,
            };
            segburn::bench::subcommands::pidnet_cpu(size, repeats, args.smoke)?
        }
        Workload::Eval { sizes } => segburn::bench::subcommands::eval_cpu(sizes, args.smoke)?,
    };
    println!("{}", report.table());
    if let Some(path) = &args.json {
        std::fs::write(path, report.to_json()?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

//! `eval`: see `eval --help`.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::configure_malloc();
    let args = segburn::commands::pidnet::eval::EvalArgs::parse();
    segburn::error_chain::finish(segburn::commands::pidnet::eval::run(&args));
}

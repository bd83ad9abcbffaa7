//! `eval`: see `eval --help`.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::share_one_malloc_arena();
    let args = segburn::commands::pidnet::eval::EvalArgs::parse();
    segburn::error_chain::finish(segburn::commands::pidnet::eval::run(&args));
}

//! `predict`: see `predict --help`.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::configure_malloc();
    let args = segburn::commands::pidnet::predict::PredictArgs::parse();
    segburn::error_chain::finish(segburn::commands::pidnet::predict::run(&args));
}

//! `train`: trains a model from an experiment file. See `train --help`.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::configure_malloc();
    let args = segburn::commands::pidnet::train::TrainArgs::parse();
    let outcome = segburn::error_chain::finish(segburn::commands::pidnet::train::run(&args));
    std::process::exit(outcome.exit_code());
}

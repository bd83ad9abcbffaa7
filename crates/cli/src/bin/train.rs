//! `train`: trains a model from an experiment file. See `train --help`.

use clap::Parser;

fn main() {
    let args = segburn::train_command::TrainArgs::parse();
    let outcome = segburn::error_chain::finish(segburn::train_command::run(&args));
    std::process::exit(outcome.exit_code());
}

//! `train`: trains a model from an experiment file. See `train --help`.

use clap::Parser;

fn main() {
    let args = segburn::train_command::TrainArgs::parse();
    match segburn::train_command::run(&args) {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::exit(1);
        }
    }
}

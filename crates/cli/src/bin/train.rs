//! `train`: trains a model from an experiment file. See `train --help`.

use clap::Parser;

fn main() {
    let args = segburn::train_command::TrainArgs::parse();
    if let Err(error) = segburn::train_command::run(&args) {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

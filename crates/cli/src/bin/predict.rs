//! `predict`: see `predict --help`.

use clap::Parser;

fn main() {
    let args = segburn::predict_command::PredictArgs::parse();
    if let Err(error) = segburn::predict_command::run(&args) {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

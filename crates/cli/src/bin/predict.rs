//! `predict`: see `predict --help`.

use clap::Parser;

fn main() {
    let args = segburn::commands::pidnet::predict::PredictArgs::parse();
    segburn::error_chain::finish(segburn::commands::pidnet::predict::run(&args));
}

//! `predict`: see `predict --help`.

use clap::Parser;

fn main() {
    let args = segburn::predict_command::PredictArgs::parse();
    segburn::error_chain::finish(segburn::predict_command::run(&args));
}

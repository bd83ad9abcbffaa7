//! `eval`: see `eval --help`.

use clap::Parser;

fn main() {
    let args = segburn::eval_command::EvalArgs::parse();
    segburn::error_chain::finish(segburn::eval_command::run(&args));
}

//! `eval`: see `eval --help`.

use clap::Parser;

fn main() {
    let args = segburn::eval_command::EvalArgs::parse();
    if let Err(error) = segburn::eval_command::run(&args) {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

//! `eval-sam2`: mean mask IoU of a SAM2 checkpoint for 1 click, 1 box and K correction clicks.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::configure_malloc();
    let args = segburn::commands::sam2::eval::EvalSam2Args::parse();
    segburn::error_chain::finish(segburn::commands::sam2::eval::run(&args));
}

//! `eval-sam2`: mean mask IoU of a SAM2 checkpoint for 1 click, 1 box and K correction clicks.

use clap::Parser;

fn main() {
    let args = segburn::sam2_eval_command::EvalSam2Args::parse();
    segburn::error_chain::finish(segburn::sam2_eval_command::run(&args));
}

//! `predict-sam2`: the mask a set of clicks and/or a box points at, as a mask PNG and an overlay.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::configure_malloc();
    let args = segburn::commands::sam2::predict::PredictSam2Args::parse();
    segburn::error_chain::finish(segburn::commands::sam2::predict::run(&args));
}

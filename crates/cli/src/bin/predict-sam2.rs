//! `predict-sam2`: the mask a set of clicks and/or a box points at, as a mask PNG and an overlay.

use clap::Parser;

fn main() {
    let args = segburn::sam2_predict_command::PredictSam2Args::parse();
    segburn::error_chain::finish(segburn::sam2_predict_command::run(&args));
}

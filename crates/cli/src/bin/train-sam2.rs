//! `train-sam2`: trains SAM2-style promptable segmentation from an experiment file. See
//! `train-sam2 --help`.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::configure_malloc();
    let args = segburn::commands::sam2::train::TrainSam2Args::parse();
    let outcome = segburn::error_chain::finish(segburn::commands::sam2::train::run(&args));
    std::process::exit(outcome.exit_code());
}

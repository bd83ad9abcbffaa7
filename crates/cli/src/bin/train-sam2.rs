//! `train-sam2`: trains SAM2-style promptable segmentation from an experiment file. See
//! `train-sam2 --help`.

use clap::Parser;

fn main() {
    let args = segburn::sam2_command::TrainSam2Args::parse();
    let outcome = segburn::error_chain::finish(segburn::sam2_command::run(&args));
    std::process::exit(outcome.exit_code());
}

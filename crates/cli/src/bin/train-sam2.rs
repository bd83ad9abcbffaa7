//! `train-sam2`: trains SAM2-style promptable segmentation from an experiment file. See
//! `train-sam2 --help`.

use clap::Parser;

fn main() {
    let args = segburn::sam2_command::TrainSam2Args::parse();
    match segburn::sam2_command::run(&args) {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::exit(1);
        }
    }
}

//! `train-sam2`: trains SAM2-style promptable segmentation from an experiment file. See
//! `train-sam2 --help`.

use clap::Parser;

fn main() {
    let args = segburn::sam2_command::TrainSam2Args::parse();
    if let Err(error) = segburn::sam2_command::run(&args) {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

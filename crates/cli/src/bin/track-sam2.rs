//! `track-sam2`: objects prompted on some frames, tracked through a folder of video frames.

use clap::Parser;

fn main() {
    segburn_train::compute_threads::configure_malloc();
    let args = segburn::commands::sam2::track::TrackSam2Args::parse();
    segburn::error_chain::finish(segburn::commands::sam2::track::run(&args));
}

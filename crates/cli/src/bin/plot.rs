//! `plot RUN_DIR`: redraws `RUN_DIR/curves.png` from `RUN_DIR/metrics.jsonl`.

use clap::Parser;

fn main() {
    let args = segburn::plot::PlotArgs::parse();
    let path = segburn::error_chain::finish(segburn::plot::run(&args));
    println!("{}", path.display());
}

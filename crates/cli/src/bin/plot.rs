//! `plot RUN_DIR`: redraws `RUN_DIR/curves.png` from `RUN_DIR/metrics.jsonl`.

use clap::Parser;

fn main() {
    let args = segburn::output::plot::PlotArgs::parse();
    let path = segburn::error_chain::finish(segburn::output::plot::run(&args));
    println!("{}", path.display());
}

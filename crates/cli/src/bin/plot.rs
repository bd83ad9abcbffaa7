//! `plot RUN_DIR`: redraws `RUN_DIR/curves.png` from `RUN_DIR/metrics.jsonl`.

use clap::Parser;

fn main() {
    let args = segburn::plot::PlotArgs::parse();
    match segburn::plot::run(&args) {
        Ok(path) => println!("{}", path.display()),
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    }
}

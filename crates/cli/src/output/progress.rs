//! Rendering training events: indicatif bars on a terminal, plain lines with `--quiet`; and
//! redrawing the run's `curves.png` at each validation.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use segburn_train::engine::{LossTerms, Observer, TrainEvent, ValidationReport};

/// The training progress bar (`None` with `--quiet`): steps done of `total`, starting at
/// `first` (a resumed run).
pub fn step_bar(quiet: bool, total: u64, first: u64) -> Option<ProgressBar> {
    (!quiet).then(|| {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30.cyan/blue} {pos}/{len} steps [{elapsed_precise} < {eta_precise}] {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_position(first);
        bar
    })
}

/// The console line of a saved checkpoint.
pub fn checkpoint_line(path: &Path, bytes: u64, seconds: f64) -> String {
    format!(
        "checkpoint {} ({:.1} MB, {seconds:.2} s)",
        path.display(),
        bytes as f64 / 1e6
    )
}

/// Renders any task's training events.
pub struct ProgressObserver {
    bar: Option<ProgressBar>,
    log_every: u64,
    curves_in: Option<PathBuf>,
}

impl ProgressObserver {
    pub fn new(quiet: bool, total_steps: u64, first_step: u64, log_every: u64) -> Self {
        let bar = step_bar(quiet, total_steps, first_step);
        Self {
            bar,
            log_every,
            curves_in: None,
        }
    }

    /// Also redraw `run_dir/curves.png` from the run's metrics at each validation.
    pub fn with_curves(mut self, run_dir: &Path) -> Self {
        self.curves_in = Some(run_dir.to_path_buf());
        self
    }

    fn print(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl<L: LossTerms, V: ValidationReport> Observer<L, V> for ProgressObserver {
    fn event(&mut self, event: &TrainEvent<L, V>) {
        match event {
            TrainEvent::Message(m) => self.print(m),
            TrainEvent::Step(r) => {
                let message = format!(
                    "epoch {} {} lr {:.2e} {:.2} img/s{}",
                    r.epoch,
                    r.loss.describe(),
                    r.lr,
                    r.images_per_second,
                    if r.skipped {
                        " [step skipped: f16 overflow]"
                    } else {
                        ""
                    }
                );
                match &self.bar {
                    Some(bar) => {
                        bar.set_position(r.step);
                        bar.set_message(message);
                    }
                    None if r.step.is_multiple_of(self.log_every) || r.step == r.total_steps => {
                        println!("step {}/{} {message}", r.step, r.total_steps)
                    }
                    None => {}
                }
            }
            TrainEvent::Validation { step, report } => {
                self.print(&report.log_text(*step));
                if let Some(run_dir) = &self.curves_in {
                    // A plot is a convenience: a failure is reported, never fatal to training.
                    if let Err(error) = crate::output::plot::write_curves(run_dir) {
                        self.print(&format!("could not draw the curves: {error}"));
                    }
                }
            }
            TrainEvent::Checkpoint {
                path,
                bytes,
                seconds,
                ..
            } => self.print(&checkpoint_line(path, *bytes, *seconds)),
        }
    }
}

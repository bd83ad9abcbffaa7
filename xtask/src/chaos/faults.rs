//! One chaos run: SIGKILLs and a SIGINT at seeded random moments inside steps and saves, each
//! followed by a resume, then a resume to the end. What happened is tallied in [`Counts`].

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::bail;

use super::checkpoints::has_checkpoint;
use super::task::Task;

/// `train`'s exit code for "stopped on request with a checkpoint".
const STOPPED: i32 = 75;

/// SplitMix64: a seeded stream of moments, without a dependency.
pub struct Moments(pub u64);

impl Moments {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Debug, Default)]
pub struct Counts {
    pub runs: usize,
    pub kills: usize,
    /// SIGINTs answered with a checkpoint and exit code 75.
    pub interrupts: usize,
    /// SIGINTs that came before the handler was installed (start-up): the default action
    /// ended the process, losing only the start-up.
    pub interrupts_in_startup: usize,
    /// Processes that had ended by the time their fault was due.
    pub ended_before_fault: usize,
    pub resumes: usize,
    pub identical: usize,
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    Interrupt,
}

/// The last step `train.log` reports (0 before the first).
fn last_logged_step(run_dir: &Path) -> u64 {
    let log = std::fs::read_to_string(run_dir.join("train.log")).unwrap_or_default();
    log.lines()
        .rev()
        .find_map(|line| line.strip_prefix("step ")?.split('/').next()?.parse().ok())
        .unwrap_or(0)
}

/// Waits until `child` has logged step `target`, then `delay` more (a random moment inside
/// the next step or save); `Some(status)` if it exited first.
fn exited_before(
    child: &mut Child,
    run_dir: &Path,
    target: u64,
    delay: Duration,
) -> anyhow::Result<Option<ExitStatus>> {
    while last_logged_step(run_dir) < target {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let until = Instant::now() + delay;
    while Instant::now() < until {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(None)
}

/// One run: its faults in a random order at random moments, then a resume to the end.
pub fn chaos_run(
    task: &Task,
    run_dir: &Path,
    steps: u64,
    step_time: Duration,
    moments: &mut Moments,
    counts: &mut Counts,
) -> anyhow::Result<()> {
    let mut faults = vec![Fault::Kill; 1 + moments.below(3)];
    faults.insert(moments.below(faults.len() + 1), Fault::Interrupt);
    for fault in faults {
        let resume = has_checkpoint(run_dir);
        counts.resumes += usize::from(resume);
        let mut child = task.command(run_dir, resume).spawn()?;
        // A seeded moment: after a step this process has still to take, plus a fraction of a
        // step, so the fault lands in a step, a save or between them.
        let logged = last_logged_step(run_dir);
        let target =
            logged + 1 + moments.below(steps.saturating_sub(logged + 1).max(1) as usize) as u64;
        let delay = step_time.mul_f64(moments.unit());
        if let Some(status) = exited_before(&mut child, run_dir, target.min(steps), delay)? {
            if !status.success() {
                bail!("{} exited with {status} before its fault", task.name);
            }
            counts.ended_before_fault += 1;
            continue;
        }
        match fault {
            Fault::Kill => {
                child.kill()?;
                child.wait()?;
                counts.kills += 1;
            }
            Fault::Interrupt => {
                let pid = child.id().to_string();
                Command::new("kill").args(["-INT", &pid]).status()?;
                let output = child.wait_with_output()?;
                match output.status.code() {
                    Some(STOPPED) => counts.interrupts += 1,
                    None => counts.interrupts_in_startup += 1,
                    // It was finishing anyway.
                    Some(0) => counts.ended_before_fault += 1,
                    _ => bail!(
                        "{} answered Ctrl-C with {}: {}",
                        task.name,
                        output.status,
                        String::from_utf8_lossy(&output.stderr)
                    ),
                }
            }
        }
    }
    let resume = has_checkpoint(run_dir);
    counts.resumes += usize::from(resume);
    task.run_to_end(run_dir, resume)
}

//! `cargo xtask chaos [--runs N] [--seed S] [--steps K]`: fault injection against the real
//! `train` and `train-sam2` binaries on tiny models. Each run is hit 1–3 times with SIGKILL and
//! once with SIGINT (Ctrl-C), at seeded random moments, resumed after each, and its final model,
//! optimizer state and training position are compared bit for bit with an uninterrupted run.
//! Then a full disk: a run on a small tmpfs (where `mount` is allowed) must fail cleanly,
//! leaving no partial file and a previous checkpoint that verifies. Unix only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use segburn_train::checkpoint::{load_checkpoint, Checkpoint, CheckpointDir};

use crate::workspace_root;

/// `train`'s exit code for "stopped on request with a checkpoint".
const STOPPED: i32 = 75;

struct Options {
    runs: usize,
    seed: u64,
    steps: u64,
}

fn options(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        runs: 4,
        seed: 17,
        steps: 6,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .with_context(|| format!("{flag} {value}: not a whole number"))
        };
        match flag.as_str() {
            "--runs" => options.runs = number()? as usize,
            "--seed" => options.seed = number()?,
            "--steps" => options.steps = number()?.max(2),
            other => bail!("unknown option {other}; chaos takes --runs N --seed S --steps K"),
        }
    }
    Ok(options)
}

/// SplitMix64: a seeded stream of moments, without a dependency.
struct Moments(u64);

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

/// A binary and the settings that make its run tiny.
struct Task {
    name: &'static str,
    binary: PathBuf,
    config: &'static str,
    sets: Vec<String>,
    steps: u64,
}

impl Task {
    fn command(&self, run_dir: &Path, resume: bool) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .current_dir(workspace_root())
            .arg(self.config)
            .arg("--quiet")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let run_dir = format!("train.run_dir={:?}", run_dir.display().to_string());
        for set in self.sets.iter().chain([&run_dir]) {
            command.arg("--set").arg(set);
        }
        if resume {
            command.arg("--resume");
        }
        command
    }

    /// Runs to the end; the error names the task and shows what the binary printed.
    fn run_to_end(&self, run_dir: &Path, resume: bool) -> anyhow::Result<()> {
        let output = self.command(run_dir, resume).output()?;
        if !output.status.success() {
            bail!(
                "{} in {} failed ({}): {}",
                self.name,
                run_dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }
}

fn tasks(steps: u64) -> anyhow::Result<Vec<Task>> {
    let release = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("release");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "segburn", "--bin", "train"])
        .args(["--bin", "train-sam2"])
        .status()?;
    if !status.success() {
        bail!("building the binaries failed");
    }
    let max_steps = format!("train.max_steps={steps}");
    // A SAM2 step of this size is about 5× faster: more steps give the faults room to land.
    let sam2_steps = format!("train.max_steps={}", 5 * steps);
    let log_every_step = "train.log_every_steps=1".to_string();
    let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Ok(vec![
        Task {
            name: "train (PIDNet-S, 64 px crops, a checkpoint every step)",
            binary: release.join("train"),
            config: "configs/quickstart.ron",
            steps,
            sets: [
                strings(&[
                    "data.augment.base_size=128",
                    "data.augment.crop_height=64",
                    "data.augment.crop_width=64",
                    "loss.ohem.min_kept=1000",
                    "train.validate_at_end=false",
                    "train.checkpoint_every_steps=1",
                ]),
                vec![max_steps.clone(), log_every_step.clone()],
            ]
            .concat(),
        },
        Task {
            name: "train-sam2 (64 px, 5×K steps, a checkpoint every 2)",
            binary: release.join("train-sam2"),
            config: "configs/sam2_decoder.ron",
            steps: 5 * steps,
            sets: [
                strings(&[
                    "train.validate_at_end=false",
                    "train.checkpoint_every_steps=Some(2)",
                ]),
                vec![sam2_steps, log_every_step],
            ]
            .concat(),
        },
    ])
}

#[derive(Debug, Default)]
struct Counts {
    runs: usize,
    kills: usize,
    /// SIGINTs answered with a checkpoint and exit code 75.
    interrupts: usize,
    /// SIGINTs that came before the handler was installed (start-up): the default action
    /// ended the process, losing only the start-up.
    interrupts_in_startup: usize,
    /// Processes that had ended by the time their fault was due.
    ended_before_fault: usize,
    resumes: usize,
    identical: usize,
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

fn has_checkpoint(run_dir: &Path) -> bool {
    !CheckpointDir::new(run_dir.join("checkpoints"))
        .list()
        .is_empty()
}

fn final_checkpoint(run_dir: &Path) -> anyhow::Result<Checkpoint> {
    let dir = CheckpointDir::new(run_dir.join("checkpoints"));
    let latest = dir
        .latest()
        .with_context(|| format!("no checkpoint in {}", run_dir.display()))?;
    Ok(load_checkpoint(&latest)?)
}

/// The differences that matter between two final checkpoints (empty: bit-identical).
fn differences(a: &Checkpoint, b: &Checkpoint) -> Vec<String> {
    let mut found = Vec::new();
    if a.meta.state != b.meta.state {
        found.push(format!(
            "training position {:?} vs {:?}",
            a.meta.state, b.meta.state
        ));
    }
    for (kind, x, y) in [
        ("model", &a.model, &b.model),
        ("optimizer", &a.optimizer, &b.optimizer),
    ] {
        if x.keys().ne(y.keys()) {
            found.push(format!("{kind} keys differ"));
            continue;
        }
        let differing = x
            .iter()
            .filter(|(k, v)| v.as_bytes() != y[*k].as_bytes())
            .count();
        if differing > 0 {
            found.push(format!("{differing} {kind} tensor(s) differ"));
        }
    }
    found
}

/// One run: its faults in a random order at random moments, then a resume to the end.
fn chaos_run(
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

/// A run on a tmpfs with room for about 1.5 checkpoints: the second save must fail with the
/// space it needs, no partial file, and a first checkpoint that verifies.
fn full_disk(task: &Task, scratch: &Path, checkpoint_bytes: u64) -> anyhow::Result<String> {
    let mount_point = scratch.join("small disk");
    std::fs::create_dir_all(&mount_point)?;
    let size = format!("size={}k", checkpoint_bytes * 3 / 2 / 1024);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
        .arg(&mount_point)
        .stderr(Stdio::null())
        .status();
    if !mounted.is_ok_and(|s| s.success()) {
        return Ok("skipped: cannot mount a small tmpfs here (needs root / CAP_SYS_ADMIN)".into());
    }
    let result = (|| -> anyhow::Result<String> {
        let run_dir = mount_point.join("run");
        let output = task.command(&run_dir, false).output()?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let checkpoints = run_dir.join("checkpoints");
        let partials: Vec<_> = std::fs::read_dir(&checkpoints)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".partial"))
            .collect();
        let expected = ["the disk is full", "is intact", "bytes) of free space"];
        if output.status.success() || !expected.iter().all(|e| stderr.contains(e)) {
            bail!("full disk: expected a failure saying {expected:?}, got: {stderr}");
        }
        if !partials.is_empty() {
            bail!("full disk: partial files left behind: {partials:?}");
        }
        let intact = final_checkpoint(&run_dir)?;
        Ok(format!(
            "failed cleanly at the save after step {} (no partial file; step {} verifies): {}",
            intact.meta.state.step,
            intact.meta.state.step,
            stderr.trim()
        ))
    })();
    let _ = Command::new("umount").arg(&mount_point).status();
    result
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    if !cfg!(unix) {
        bail!("chaos sends Unix signals; run it on Linux or macOS");
    }
    let options = options(args)?;
    let scratch = tempfile::tempdir()?;
    let mut moments = Moments(options.seed);
    let mut totals = Counts::default();
    let mut failures = Vec::new();
    let mut checkpoint_bytes = 0;
    let tasks = tasks(options.steps)?;
    for (task_index, task) in tasks.iter().enumerate() {
        let reference_dir = scratch.path().join(format!("task {task_index} reference"));
        let started = Instant::now();
        task.run_to_end(&reference_dir, false)?;
        let expected = started.elapsed();
        let reference = final_checkpoint(&reference_dir)?;
        if checkpoint_bytes == 0 {
            checkpoint_bytes = std::fs::metadata(&reference.path)?.len();
        }
        let mut counts = Counts::default();
        for index in 0..options.runs {
            let run_dir = scratch
                .path()
                .join(format!("task {task_index} run {index} données"));
            counts.runs += 1;
            let step_time = expected.div_f64(task.steps as f64);
            chaos_run(
                task,
                &run_dir,
                task.steps,
                step_time,
                &mut moments,
                &mut counts,
            )?;
            let found = differences(&reference, &final_checkpoint(&run_dir)?);
            if found.is_empty() {
                counts.identical += 1;
            } else {
                failures.push(format!("{} run {index}: {}", task.name, found.join("; ")));
            }
        }
        println!(
            "{}: {} runs, {} SIGKILLs, {} SIGINTs answered with a checkpoint (+{} during \
             start-up), {} resumes, {} ended before their fault; {} of {} bit-identical to the \
             uninterrupted run ({:.1} s)",
            task.name,
            counts.runs,
            counts.kills,
            counts.interrupts,
            counts.interrupts_in_startup,
            counts.resumes,
            counts.ended_before_fault,
            counts.identical,
            counts.runs,
            expected.as_secs_f64()
        );
        totals.runs += counts.runs;
        totals.kills += counts.kills;
        totals.interrupts += counts.interrupts;
        totals.interrupts_in_startup += counts.interrupts_in_startup;
        totals.resumes += counts.resumes;
        totals.ended_before_fault += counts.ended_before_fault;
        totals.identical += counts.identical;
    }
    println!(
        "full disk: {}",
        full_disk(&tasks[0], scratch.path(), checkpoint_bytes)?
    );
    println!(
        "total (seed {}): {} runs, {} SIGKILLs, {} SIGINTs with a checkpoint (+{} in start-up), \
         {} resumes, {} ended before their fault, {} of {} identical",
        options.seed,
        totals.runs,
        totals.kills,
        totals.interrupts,
        totals.interrupts_in_startup,
        totals.resumes,
        totals.ended_before_fault,
        totals.identical,
        totals.runs
    );
    if !failures.is_empty() {
        bail!("{} run(s) differ:\n{}", failures.len(), failures.join("\n"));
    }
    Ok(())
}

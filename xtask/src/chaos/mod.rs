//! `cargo xtask chaos [--runs N] [--seed S] [--steps K]`: fault injection against the real
//! `train` and `train-sam2` binaries on tiny models. Each run is hit 1–3 times with SIGKILL and
//! once with SIGINT (Ctrl-C), at seeded random moments, resumed after each, and its final model,
//! optimizer state and training position are compared bit for bit with an uninterrupted run.
//! Then a full disk: a run on a small tmpfs (where `mount` is allowed) must fail cleanly,
//! leaving no partial file and a previous checkpoint that verifies. Unix only.

mod checkpoints;
mod faults;
mod full_disk;
mod task;

use std::time::Instant;

use anyhow::{bail, Context};

use checkpoints::{differences, final_checkpoint};
use faults::{chaos_run, Counts, Moments};
use full_disk::full_disk;
use task::tasks;

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

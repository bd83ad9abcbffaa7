//! `cargo xtask bench-loader`: decode + full training augmentation throughput on 2048x1024 PNGs.
//!
//! The images are street scenes with heavy per-pixel noise so they weigh about as much as the
//! anchor's 5.3 MB noisy PNG (noise is what makes PNG decoding slow). Measured: decoding alone,
//! the whole per-sample pipeline on the calling thread, and the threaded loader with one worker
//! and with one worker per core. Reference (spec): OpenCV-Python decode + official augmentation
//! = 5.7 images/s on one core (decode alone 13.3/s).

use anyhow::Context;
use segburn::bench::throughput::{self, StageRate};
use segburn_data::{DataConfig, DatasetIndex, EdgeRule, Layout};

use crate::{bench_jpeg, png_file, scene};

const WIDTH: usize = 2048;
const HEIGHT: usize = 1024;
/// Noise amplitude giving files of about 5.3 MB.
const GRAIN: f32 = 40.0;
const ANCHOR_PER_CORE: f64 = 5.7;

struct Options {
    images: usize,
    epochs: u64,
    workers: usize,
    /// Run one stage only (`decode`, `pipeline`, `edges`, `jpeg`, `loader`), e.g. under a
    /// profiler.
    only: Option<String>,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        images: 8,
        epochs: 3,
        workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
        only: None,
    };
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        if flag == "--only" {
            options.only = Some(value.clone());
            continue;
        }
        let number: usize = value
            .parse()
            .with_context(|| format!("{flag} {value}: not a number"))?;
        match flag.as_str() {
            "--images" => options.images = number.max(1),
            "--epochs" => options.epochs = number.max(1) as u64,
            "--workers" => options.workers = number.max(1),
            other => anyhow::bail!(
                "unknown option {other}; options: --images --epochs --workers --only STAGE"
            ),
        }
    }
    Ok(options)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let dir = tempfile::tempdir().context("cannot create a temporary folder")?;
    let root = dir.path().join("cityscapes");
    let mut bytes = 0u64;
    let mut jpegs = Vec::new();
    println!(
        "generating {} noisy {WIDTH}x{HEIGHT} PNGs...",
        options.images
    );
    for i in 0..options.images {
        let scene = scene::draw(1000 + i as u64, WIDTH, HEIGHT, GRAIN, 1);
        let stem = format!("bench_{i:06}_000019");
        let image = root.join(format!("leftImg8bit/train/bench/{stem}_leftImg8bit.png"));
        let label = root.join(format!("gtFine/train/bench/{stem}_gtFine_labelIds.png"));
        png_file::write(&image, WIDTH, HEIGHT, 3, &scene.rgb)?;
        png_file::write(&label, WIDTH, HEIGHT, 1, &scene.label)?;
        if run_stage(&options, "jpeg") {
            let jpeg = dir.path().join(format!("{stem}.jpg"));
            bench_jpeg::write(&jpeg, WIDTH, HEIGHT, &scene)?;
            jpegs.push(jpeg);
        }
        bytes += std::fs::metadata(&image)?.len();
    }
    println!(
        "mean image file: {:.2} MB (anchor: 5.3 MB)",
        bytes as f64 / options.images as f64 / 1e6
    );

    let mut config = DataConfig {
        layout: Layout::Cityscapes { root },
        ..DataConfig::default()
    };
    config.train_loader.batch_size = 1;
    config.train_loader.drop_last = false;
    let index = DatasetIndex::new(&config.layout, "train", config.ignore_index)?;
    let run = |stage: &str| run_stage(&options, stage);

    if run("decode") {
        report(
            "decode only",
            &throughput::time_decode(&index, options.epochs)?,
        );
    }
    if run("pipeline") {
        report(
            "decode + labels + edges + augment (crop 1024x1024), calling thread",
            &throughput::time_pipeline(&index, &config, options.epochs)?,
        );
    }
    if run("edges") {
        // The official edges (Canny) against the neighbour rule segburn used before, alternated.
        let mut neighbour = config.clone();
        neighbour.edges.rule = EdgeRule::NeighbourDiff;
        for round in 1..=3 {
            for (name, config) in [("official (Canny)", &config), ("NeighbourDiff", &neighbour)] {
                let rate = throughput::time_pipeline(&index, config, options.epochs)?;
                report(&format!("pipeline with {name} edges, round {round}"), &rate);
            }
        }
    }
    if run("jpeg") {
        bench_jpeg::compare(&jpegs, options.epochs, 3)?;
    }
    if run("loader") {
        for workers in [1, options.workers] {
            let rate = throughput::time_loader(&index, &config, workers, options.epochs)?;
            report("loader, full training pipeline", &rate);
        }
    }
    Ok(())
}

fn run_stage(options: &Options, stage: &str) -> bool {
    options.only.as_deref().is_none_or(|only| only == stage)
}

fn report(what: &str, rate: &StageRate) {
    print!(
        "{what}: {:.2} images/s wall ({} thread(s))",
        rate.images_per_second(),
        rate.threads
    );
    if let Some(per_core) = rate.images_per_cpu_second() {
        print!(
            "; {per_core:.2} images per CPU-second = {:.2}x the {ANCHOR_PER_CORE}/s anchor",
            per_core / ANCHOR_PER_CORE
        );
    }
    println!();
}

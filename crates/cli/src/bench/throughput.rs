//! Loader throughput: the measuring core shared by `cargo xtask bench-loader` and the `bench`
//! binary. Three stages over a [`DatasetIndex`]: decoding alone, the whole per-sample training
//! pipeline on the calling thread, and the threaded [`Loader`]. Each reports wall-clock time
//! and the process's CPU time, so that per-core rates are not hurt by other programs
//! competing for the cores.

use std::time::Instant;

use segburn_data::rng::SplitMix64;
use segburn_data::{DataConfig, DataError, DatasetIndex, Loader, Mode, Pipeline};

/// The loader seed of the benchmarks (any fixed value).
const SEED: u64 = 304;

/// How fast one stage went.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRate {
    pub images: usize,
    pub wall_seconds: f64,
    /// User + system time of the whole process over the stage; `None` off Linux.
    pub cpu_seconds: Option<f64>,
    pub threads: usize,
}

impl StageRate {
    pub fn images_per_second(&self) -> f64 {
        self.images as f64 / self.wall_seconds.max(1e-9)
    }

    /// Images per CPU-second: the per-core rate, independent of the machine's load.
    pub fn images_per_cpu_second(&self) -> Option<f64> {
        self.cpu_seconds
            .filter(|c| *c > 0.0)
            .map(|c| self.images as f64 / c)
    }
}

/// User + system CPU time of the whole process (all threads, finished ones included), from
/// `/proc/self/stat`; `None` off Linux.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on every Linux ABI.
    Some((utime + stime) / 100.0)
}

fn timed(
    threads: usize,
    f: impl FnOnce() -> Result<usize, DataError>,
) -> Result<StageRate, DataError> {
    let (wall, cpu) = (Instant::now(), process_cpu_seconds());
    let images = f()?;
    Ok(StageRate {
        images,
        wall_seconds: wall.elapsed().as_secs_f64(),
        cpu_seconds: process_cpu_seconds().zip(cpu).map(|(now, then)| now - then),
        threads,
    })
}

/// Decodes every image of `index` `epochs` times.
pub fn time_decode(index: &DatasetIndex, epochs: u64) -> Result<StageRate, DataError> {
    timed(1, || {
        for _ in 0..epochs {
            for sample in index.samples() {
                segburn_data::decode::read_image(&sample.image)?;
            }
        }
        Ok(index.samples().len() * epochs as usize)
    })
}

/// Decode + labels + edges + training augmentation of every sample, on the calling thread.
pub fn time_pipeline(
    index: &DatasetIndex,
    config: &DataConfig,
    epochs: u64,
) -> Result<StageRate, DataError> {
    let pipeline = Pipeline::new(config, Mode::Train)?;
    timed(1, || {
        for epoch in 0..epochs {
            for (i, sample) in index.samples().iter().enumerate() {
                let mut rng = SplitMix64::for_sample(0, epoch, i as u64);
                pipeline.load(sample, index.label_map(), &mut rng)?;
            }
        }
        Ok(index.samples().len() * epochs as usize)
    })
}

/// The threaded training loader with `workers` workers (batch size and crop from `config`),
/// over `epochs` epochs.
pub fn time_loader(
    index: &DatasetIndex,
    config: &DataConfig,
    workers: usize,
    epochs: u64,
) -> Result<StageRate, DataError> {
    let mut config = config.clone();
    config.train_loader.num_workers = workers.max(1);
    let loader = Loader::new(index.clone(), &config, Mode::Train, SEED)?;
    timed(workers.max(1), || {
        let mut images = 0;
        for epoch in 0..epochs {
            for batch in loader.epoch_iter(epoch, 0) {
                images += batch?.batch_size;
            }
        }
        Ok(images)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use segburn_data::Layout;

    #[test]
    fn every_stage_runs_on_the_bundled_sample() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
        let mut config = DataConfig {
            layout: Layout::Cityscapes { root },
            ..DataConfig::default()
        };
        config.augment.base_size = 256;
        config.augment.crop_height = 64;
        config.augment.crop_width = 64;
        config.train_loader.batch_size = 4;
        config.train_loader.drop_last = false;
        let index = DatasetIndex::new(&config.layout, "val", config.ignore_index).unwrap();
        let n = index.samples().len();
        assert_eq!(time_decode(&index, 1).unwrap().images, n);
        assert_eq!(time_pipeline(&index, &config, 1).unwrap().images, n);
        let loader = time_loader(&index, &config, 2, 1).unwrap();
        assert_eq!((loader.images, loader.threads), (n, 2));
        assert!(loader.images_per_second() > 0.0);
        if cfg!(target_os = "linux") {
            assert!(process_cpu_seconds().is_some());
        }
    }
}

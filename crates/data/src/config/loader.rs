//! How the training and the validation loaders batch samples and how many threads they use.

use serde::{Deserialize, Serialize};

use crate::error::DataError;

/// How batches are made and how many threads make them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoaderConfig {
    /// Samples per batch (official global batch: 2 GPUs x 6).
    pub batch_size: usize,
    /// Worker threads; 0 means one per available core.
    pub num_workers: usize,
    /// Finished batches kept ready ahead of the trainer, on top of one per worker in progress.
    pub prefetch: usize,
    /// Drop the last, incomplete batch of an epoch.
    pub drop_last: bool,
    /// Read the samples in a new random order every epoch.
    pub shuffle: bool,
}

impl Default for LoaderConfig {
    fn default() -> Self {
        Self {
            batch_size: 12,
            num_workers: 0,
            prefetch: 2,
            drop_last: true,
            shuffle: true,
        }
    }
}

impl LoaderConfig {
    pub(super) fn check(&self, name: &str) -> Result<(), DataError> {
        if self.batch_size == 0 {
            return Err(DataError::config(
                format!("{name}.batch_size"),
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// Whether this configuration reads every sample exactly once, in dataset order.
    pub fn reads_every_sample_in_order(&self) -> bool {
        !self.shuffle && !self.drop_last
    }

    /// The number of worker threads this configuration asks for, with 0 resolved to the number
    /// of available cores.
    pub fn resolved_workers(&self) -> usize {
        if self.num_workers > 0 {
            self.num_workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// How validation batches are made. Validation (and `eval`) reads every sample of the split
/// exactly once, in dataset order, so `shuffle` and `drop_last` cannot apply: they are accepted
/// only as `false` (what older experiment files and checkpoints spell out) and refused
/// otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValLoaderConfig {
    /// Samples per batch. Official validation runs batch 6 per GPU at full resolution; batch 1
    /// keeps memory low on one device and allows mixed image sizes.
    pub batch_size: usize,
    /// Worker threads; 0 means one per available core.
    pub num_workers: usize,
    /// Finished batches kept ready ahead of the evaluator, on top of one per worker in progress.
    pub prefetch: usize,
    /// Must be false: the last, incomplete batch is always evaluated.
    pub drop_last: bool,
    /// Must be false: samples are always read in dataset order.
    pub shuffle: bool,
}

impl Default for ValLoaderConfig {
    fn default() -> Self {
        Self {
            batch_size: 1,
            num_workers: 0,
            prefetch: 2,
            drop_last: false,
            shuffle: false,
        }
    }
}

impl ValLoaderConfig {
    pub(super) fn check(&self) -> Result<(), DataError> {
        let why = "validation reads every sample exactly once, in dataset order; remove the \
                   setting (or set it to false)";
        if self.drop_last {
            return Err(DataError::config("val_loader.drop_last", why));
        }
        if self.shuffle {
            return Err(DataError::config("val_loader.shuffle", why));
        }
        self.loader().check("val_loader")
    }

    /// The loader settings of validation: these sizes, dataset order, every sample.
    pub fn loader(&self) -> LoaderConfig {
        LoaderConfig {
            batch_size: self.batch_size,
            num_workers: self.num_workers,
            prefetch: self.prefetch,
            drop_last: false,
            shuffle: false,
        }
    }
}

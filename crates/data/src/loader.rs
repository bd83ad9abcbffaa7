//! The threaded, deterministic loader.
//!
//! Worker threads build whole batches. The iterator hands out "tickets" (batch numbers) through
//! a bounded job channel, at most `workers + prefetch` ahead of the batch the trainer will take
//! next; finished batches come back on a result channel and are put back in order. So memory is
//! bounded, no thread ever waits on a full channel while holding work the trainer needs, and the
//! batches are the same whatever the number of workers, because every batch is a pure function
//! of `(seed, epoch, batch)`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

#[cfg(test)]
use crate::augment::Normaliser;
use crate::batch::{build_batch, Batch};
use crate::config::{DataConfig, LoaderConfig, Mode};
use crate::error::DataError;
use crate::index::DatasetIndex;
use crate::pipeline::Pipeline;
use crate::rng::epoch_permutation;

/// Makes the batches of any epoch, from any position, on worker threads.
#[derive(Debug, Clone)]
pub struct Loader {
    dataset: Arc<DatasetIndex>,
    pipeline: Arc<Pipeline>,
    config: LoaderConfig,
    seed: u64,
}

impl Loader {
    /// A loader over `dataset` for `mode`, with the loader settings of `mode` in `config`
    /// (`train_loader` or `val_loader`). `seed` fixes the epoch orders and the augmentation.
    pub fn new(
        dataset: DatasetIndex,
        config: &DataConfig,
        mode: Mode,
        seed: u64,
    ) -> Result<Self, DataError> {
        let pipeline = Pipeline::new(config, mode)?;
        Self::with_pipeline(dataset, pipeline, config.loader(mode), seed)
    }

    /// A loader with an explicit pipeline and loader settings. A validation pipeline refuses
    /// settings that would skip or reorder samples.
    pub fn with_pipeline(
        dataset: DatasetIndex,
        pipeline: Pipeline,
        config: LoaderConfig,
        seed: u64,
    ) -> Result<Self, DataError> {
        if config.batch_size == 0 {
            return Err(DataError::config("batch_size", "must be at least 1"));
        }
        if pipeline.mode() == Mode::Validation && !config.reads_every_sample_in_order() {
            return Err(DataError::config(
                "val_loader",
                "validation reads every sample exactly once, in dataset order: shuffle and \
                 drop_last must be false",
            ));
        }
        if dataset.is_empty() {
            return Err(DataError::EmptySplit {
                split: dataset.split().to_string(),
                detail: "the index has no sample".to_string(),
            });
        }
        let loader = Self {
            dataset: Arc::new(dataset),
            pipeline: Arc::new(pipeline),
            config,
            seed,
        };
        if loader.batches_per_epoch() == 0 {
            return Err(DataError::EmptySplit {
                split: loader.dataset.split().to_string(),
                detail: format!(
                    "{} samples make no full batch of {} and drop_last is on",
                    loader.dataset.len(),
                    loader.config.batch_size
                ),
            });
        }
        Ok(loader)
    }

    /// Batches in one epoch: `len / batch_size`, rounded up unless `drop_last`.
    pub fn batches_per_epoch(&self) -> usize {
        let (len, size) = (self.dataset.len(), self.config.batch_size);
        if self.config.drop_last {
            len / size
        } else {
            len.div_ceil(size)
        }
    }

    /// The dataset this loader reads.
    pub fn dataset(&self) -> &DatasetIndex {
        &self.dataset
    }

    /// The loader settings.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// The seed of epoch orders and augmentation.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The dataset indices of the samples of `epoch`, in reading order.
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        if self.config.shuffle {
            epoch_permutation(self.seed, epoch, self.dataset.len())
        } else {
            (0..self.dataset.len()).collect()
        }
    }

    /// Builds batch `batch` of `epoch` on the calling thread (what each worker runs).
    pub fn load_batch(&self, epoch: u64, batch: usize) -> Result<Batch, DataError> {
        let batches = self.batches_per_epoch();
        if batch >= batches {
            return Err(DataError::BatchOutOfRange { batch, batches });
        }
        let order = self.epoch_order(epoch);
        let never = AtomicBool::new(false);
        self.build(&order, epoch, batch, &never)?
            .ok_or(DataError::WorkersStopped { epoch, batch })
    }

    fn build(
        &self,
        order: &[usize],
        epoch: u64,
        batch: usize,
        cancel: &AtomicBool,
    ) -> Result<Option<Batch>, DataError> {
        let size = self.config.batch_size;
        let start = (batch * size).min(order.len());
        let end = ((batch + 1) * size).min(order.len());
        build_batch(
            &self.dataset,
            &self.pipeline,
            self.seed,
            epoch,
            batch,
            &order[start..end],
            cancel,
        )
    }

    /// The batches `start_batch..batches_per_epoch()` of `epoch`, in order, built on
    /// `num_workers` threads. The first error ends the iteration (after it is yielded); dropping
    /// the iterator stops and joins the workers.
    pub fn epoch_iter(&self, epoch: u64, start_batch: usize) -> EpochIter {
        EpochIter::start(self.clone(), epoch, start_batch)
    }
}

/// The batches of one epoch, in order. See [`Loader::epoch_iter`].
pub struct EpochIter {
    epoch: u64,
    next: usize,
    end: usize,
    next_ticket: usize,
    jobs: Option<Sender<usize>>,
    results: Receiver<(usize, Result<Option<Batch>, DataError>)>,
    ready: BTreeMap<usize, Result<Option<Batch>, DataError>>,
    cancel: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    finished: bool,
    spawn_error: Option<DataError>,
}

impl EpochIter {
    fn start(loader: Loader, epoch: u64, start_batch: usize) -> Self {
        let end = loader.batches_per_epoch();
        let start = start_batch.min(end);
        let remaining = end - start;
        let workers = loader.config.resolved_workers().clamp(1, remaining.max(1));
        let tickets = (workers + loader.config.prefetch).min(remaining);
        // Capacity for every ticket: neither side ever blocks on a full channel.
        let (job_sender, job_receiver) = crossbeam_channel::bounded::<usize>(tickets.max(1));
        let (result_sender, results) = crossbeam_channel::bounded(tickets.max(1));
        let cancel = Arc::new(AtomicBool::new(false));
        let order: Arc<Vec<usize>> = Arc::new(loader.epoch_order(epoch));
        let mut iter = Self {
            epoch,
            next: start,
            end,
            next_ticket: start,
            jobs: Some(job_sender),
            results,
            ready: BTreeMap::new(),
            cancel: Arc::clone(&cancel),
            workers: Vec::with_capacity(workers),
            finished: remaining == 0,
            spawn_error: None,
        };
        if remaining == 0 {
            return iter;
        }
        let loader = Arc::new(loader);
        for worker in 0..workers {
            let (loader, order, cancel) =
                (Arc::clone(&loader), Arc::clone(&order), Arc::clone(&cancel));
            let (jobs, results) = (job_receiver.clone(), result_sender.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("segburn-data-{worker}"))
                .spawn(move || {
                    while let Ok(batch) = jobs.recv() {
                        let outcome = catch_unwind(AssertUnwindSafe(|| {
                            loader.build(&order, epoch, batch, &cancel)
                        }))
                        .unwrap_or_else(|panic| {
                            Err(DataError::WorkerPanicked {
                                epoch,
                                batch,
                                message: panic_message(panic.as_ref()),
                            })
                        });
                        if results.send((batch, outcome)).is_err() {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(handle) => iter.workers.push(handle),
                Err(source) => {
                    iter.spawn_error = Some(DataError::Spawn { source });
                    break;
                }
            }
        }
        for _ in 0..tickets {
            iter.issue_ticket();
        }
        iter
    }

    fn issue_ticket(&mut self) {
        if self.next_ticket < self.end {
            if let Some(jobs) = &self.jobs {
                // Cannot fail while we hold the receiver side alive through the workers; if
                // every worker died the result channel reports it below.
                let _ = jobs.send(self.next_ticket);
            }
            self.next_ticket += 1;
        }
    }

    /// Stops the workers: no new batches, and batches in progress end at the next sample.
    fn stop(&mut self) {
        self.finished = true;
        self.cancel.store(true, Ordering::Relaxed);
        self.jobs = None;
    }

    /// The next batch number this iterator will yield.
    pub fn position(&self) -> usize {
        self.next
    }
}

impl Iterator for EpochIter {
    type Item = Result<Batch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished || self.next >= self.end {
            return None;
        }
        if self.workers.is_empty() {
            if let Some(error) = self.spawn_error.take() {
                self.stop();
                return Some(Err(error));
            }
        }
        let batch = self.next;
        let outcome = loop {
            if let Some(outcome) = self.ready.remove(&batch) {
                break outcome;
            }
            match self.results.recv() {
                Ok((number, outcome)) => {
                    self.ready.insert(number, outcome);
                }
                Err(_) => {
                    break Err(DataError::WorkersStopped {
                        epoch: self.epoch,
                        batch,
                    })
                }
            }
        };
        self.next += 1;
        self.issue_ticket();
        let item = match outcome {
            Ok(Some(batch)) => Ok(batch),
            Ok(None) => Err(DataError::WorkersStopped {
                epoch: self.epoch,
                batch,
            }),
            Err(error) => Err(error),
        };
        if item.is_err() || self.next >= self.end {
            self.stop();
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.finished {
            0
        } else {
            self.end - self.next
        };
        (left.min(1), Some(left))
    }
}

impl Drop for EpochIter {
    fn drop(&mut self) {
        self.stop();
        // Unblock any worker waiting to hand in a result, then wait for all of them.
        while self.results.try_recv().is_ok() {}
        for worker in self.workers.drain(..) {
            // A worker that panicked outside a batch has nothing left to report.
            let _ = worker.join();
        }
    }
}

/// The text of a caught panic (`&str` or `String` payloads; anything else is "unknown panic").
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

#[cfg(test)]
#[path = "loader_tests.rs"]
mod tests;

//! Training batches of objects, prepared one thread ahead of the trainer.
//!
//! One background thread is enough here: a SAM2 step runs the decoder several times per
//! batch, so decoding a few images per step is small next to it; the thread only hides that
//! latency. Batches are pure functions of `(seed, epoch, batch)`, so prefetching changes
//! nothing but timing.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Receiver;

use super::dataset::{ObjectBatch, ObjectDataset};
use super::error::ObjectError;

/// Hands out the training batches of any epoch, from any position.
#[derive(Debug, Clone)]
pub struct ObjectLoader {
    dataset: Arc<ObjectDataset>,
    prefetch: usize,
}

impl ObjectLoader {
    /// `prefetch` batches are kept ready (0: each batch is built when asked for).
    pub fn new(dataset: ObjectDataset, prefetch: usize) -> Self {
        Self {
            dataset: Arc::new(dataset),
            prefetch,
        }
    }

    pub fn dataset(&self) -> &ObjectDataset {
        &self.dataset
    }

    pub fn batches_per_epoch(&self) -> usize {
        self.dataset.batches_per_epoch()
    }

    /// The batches `start..` of `epoch`, in order.
    pub fn epoch_iter(&self, epoch: u64, start: usize) -> ObjectEpochIter {
        let end = self.batches_per_epoch();
        if self.prefetch == 0 {
            return ObjectEpochIter {
                dataset: self.dataset.clone(),
                epoch,
                next: start,
                end,
                worker: None,
            };
        }
        let (sender, receiver) = crossbeam_channel::bounded(self.prefetch);
        let dataset = self.dataset.clone();
        let handle = std::thread::Builder::new()
            .name("segburn-objects".to_string())
            .spawn(move || {
                for batch in start..end {
                    let result = dataset.train_batch(epoch, batch);
                    let failed = result.is_err();
                    // The receiver is gone when the trainer stopped early: just finish.
                    if sender.send(result).is_err() || failed {
                        break;
                    }
                }
            });
        let worker = match handle {
            Ok(handle) => Some((receiver, handle)),
            // No thread: build the batches in line instead.
            Err(_) => None,
        };
        ObjectEpochIter {
            dataset: self.dataset.clone(),
            epoch,
            next: start,
            end,
            worker,
        }
    }
}

/// The background thread and the channel it sends batches on.
type Worker = (Receiver<Result<ObjectBatch, ObjectError>>, JoinHandle<()>);

/// The batches of one epoch; dropping it stops the background thread.
pub struct ObjectEpochIter {
    dataset: Arc<ObjectDataset>,
    epoch: u64,
    next: usize,
    end: usize,
    worker: Option<Worker>,
}

impl ObjectEpochIter {
    /// The batch number the next call returns.
    pub fn position(&self) -> usize {
        self.next
    }
}

impl Iterator for ObjectEpochIter {
    type Item = Result<ObjectBatch, ObjectError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let batch = self.next;
        self.next += 1;
        Some(match &self.worker {
            Some((receiver, _)) => receiver.recv().unwrap_or(Err(ObjectError::LoaderStopped {
                epoch: self.epoch,
                batch,
            })),
            None => self.dataset.train_batch(self.epoch, batch),
        })
    }
}

impl Drop for ObjectEpochIter {
    fn drop(&mut self) {
        if let Some((receiver, handle)) = self.worker.take() {
            // Disconnect first so a thread blocked on a full channel returns, then join it.
            drop(receiver);
            let _ = handle.join();
        }
    }
}

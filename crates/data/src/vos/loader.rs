//! Training clips prepared on worker threads, in order.
//!
//! Worker `w` of `W` reads the clips at positions `start + w`, `start + w + W`, … of the
//! epoch and sends them on its own bounded channel; the iterator takes from the channels in
//! turn, so clips arrive in epoch order without a reordering buffer. A clip is a pure function
//! of `(seed, epoch, video)`, so the number of workers changes only the timing.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Receiver;

use super::clip::VosClip;
use super::dataset::VosDataset;
use super::error::VosError;

/// Hands out the training clips of any epoch, from any position.
#[derive(Debug, Clone)]
pub struct VosLoader {
    dataset: Arc<VosDataset>,
    workers: usize,
    prefetch: usize,
}

impl VosLoader {
    /// `workers` threads (0: each clip is read when asked for), each keeping up to `prefetch`
    /// clips ready (at least 1).
    pub fn new(dataset: VosDataset, workers: usize, prefetch: usize) -> Self {
        Self {
            dataset: Arc::new(dataset),
            workers,
            prefetch: prefetch.max(1),
        }
    }

    pub fn dataset(&self) -> &VosDataset {
        &self.dataset
    }

    /// The clips `start..` of `epoch`, in order.
    pub fn epoch_iter(&self, epoch: u64, start: usize) -> VosEpochIter {
        let end = self.dataset.len();
        let count = self.workers.min(end.saturating_sub(start));
        let mut workers: Vec<Worker> = Vec::new();
        for worker in 0..count {
            let (sender, receiver) = crossbeam_channel::bounded(self.prefetch);
            let dataset = self.dataset.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("segburn-vos-{worker}"))
                .spawn(move || {
                    for position in (start + worker..end).step_by(count) {
                        let result = dataset.train_clip(epoch, position);
                        let failed = result.is_err();
                        // The receiver is gone when the trainer stopped early: just finish.
                        if sender.send(result).is_err() || failed {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(handle) => workers.push((receiver, handle)),
                // No thread: read the clips in line instead (same clips, slower).
                Err(_) => {
                    stop(&mut workers);
                    break;
                }
            }
        }
        VosEpochIter {
            dataset: self.dataset.clone(),
            epoch,
            start,
            next: start,
            end,
            workers,
        }
    }
}

/// One worker: the channel it sends its clips on, and its thread.
type Worker = (Receiver<Result<VosClip, VosError>>, JoinHandle<()>);

/// The clips of one epoch; dropping it stops and joins the workers.
pub struct VosEpochIter {
    dataset: Arc<VosDataset>,
    epoch: u64,
    start: usize,
    next: usize,
    end: usize,
    workers: Vec<Worker>,
}

impl VosEpochIter {
    /// The position the next call returns.
    pub fn position(&self) -> usize {
        self.next
    }
}

impl Iterator for VosEpochIter {
    type Item = Result<VosClip, VosError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let position = self.next;
        self.next += 1;
        let result = if self.workers.is_empty() {
            self.dataset.train_clip(self.epoch, position)
        } else {
            let (receiver, _) = &self.workers[(position - self.start) % self.workers.len()];
            receiver.recv().unwrap_or(Err(VosError::LoaderStopped {
                epoch: self.epoch,
                position,
            }))
        };
        if result.is_err() {
            // The failing worker has stopped: end the epoch with its error.
            self.next = self.end;
        }
        Some(result)
    }
}

/// Disconnects the workers first, so a thread blocked on a full channel returns, then joins
/// them.
fn stop(workers: &mut Vec<Worker>) {
    let (receivers, handles): (Vec<_>, Vec<_>) = workers.drain(..).unzip();
    drop(receivers);
    for handle in handles {
        let _ = handle.join();
    }
}

impl Drop for VosEpochIter {
    fn drop(&mut self) {
        stop(&mut self.workers);
    }
}

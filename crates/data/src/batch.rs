//! Batches: contiguous buffers ready for one upload each.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::augment::SampleSlot;
use crate::error::DataError;
use crate::index::DatasetIndex;
use crate::pipeline::Pipeline;
use crate::rng::SplitMix64;

/// A batch of `N` samples of `H x W` pixels, and where in the run it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The epoch this batch belongs to.
    pub epoch: u64,
    /// Its position in the epoch (`0..batches_per_epoch`).
    pub index: usize,
    /// `N`: samples in this batch (the last batch of a validation epoch may be smaller).
    pub batch_size: usize,
    pub height: usize,
    pub width: usize,
    /// `[N, 3, H, W]`, normalised RGB, contiguous.
    pub images: Vec<f32>,
    /// `[N, H, W]` training ids or the ignore index.
    pub labels: Vec<u8>,
    /// `[N, H, W]` PIDNet boundary target, 0 or 1.
    pub edges: Vec<u8>,
    /// The samples' names, in batch order.
    pub names: Vec<String>,
    /// The samples' positions in the dataset index, in batch order.
    pub sample_indices: Vec<usize>,
}

impl Batch {
    /// `[N, 3, H, W]`.
    pub fn image_shape(&self) -> [usize; 4] {
        [self.batch_size, 3, self.height, self.width]
    }

    /// `[N, H, W]`, the shape of `labels` and `edges`.
    pub fn label_shape(&self) -> [usize; 3] {
        [self.batch_size, self.height, self.width]
    }
}

/// Builds batch `index` of `epoch` from the dataset samples `samples`, each augmented with its
/// own `(seed, epoch, sample)` stream, so the result does not depend on who builds it or when.
/// Returns `Ok(None)` when `cancel` was raised in between samples.
pub(crate) fn build_batch(
    dataset: &DatasetIndex,
    pipeline: &Pipeline,
    seed: u64,
    epoch: u64,
    index: usize,
    samples: &[usize],
    cancel: &AtomicBool,
) -> Result<Option<Batch>, DataError> {
    let labels = dataset.label_map();
    let mut batch: Option<Batch> = None;
    let mut first_image = None;
    for (slot_number, &sample) in samples.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let entry = &dataset.samples()[sample];
        let decoded = pipeline.decode(entry, labels)?;
        let mut rng = SplitMix64::for_sample(seed, epoch, sample as u64);
        let geometry = pipeline.geometry(&decoded, &mut rng);
        let batch = batch.get_or_insert_with(|| {
            first_image = Some(entry.image.clone());
            let pixels = samples.len() * geometry.width * geometry.height;
            Batch {
                epoch,
                index,
                batch_size: samples.len(),
                height: geometry.height,
                width: geometry.width,
                images: vec![0.0; 3 * pixels],
                labels: vec![0; pixels],
                edges: vec![0; pixels],
                names: Vec::with_capacity(samples.len()),
                sample_indices: Vec::with_capacity(samples.len()),
            }
        });
        if (geometry.width, geometry.height) != (batch.width, batch.height) {
            return Err(DataError::BatchShape {
                first: first_image.clone().unwrap_or_default(),
                other: entry.image.clone(),
                first_width: batch.width,
                first_height: batch.height,
                other_width: geometry.width,
                other_height: geometry.height,
            });
        }
        let pixels = batch.width * batch.height;
        let range = slot_number * pixels..(slot_number + 1) * pixels;
        pipeline.render_into(
            &decoded,
            &geometry,
            labels.ignore_index(),
            SampleSlot {
                image: &mut batch.images[3 * range.start..3 * range.end],
                label: &mut batch.labels[range.clone()],
                edges: &mut batch.edges[range],
            },
        );
        batch.names.push(entry.name.clone());
        batch.sample_indices.push(sample);
    }
    Ok(batch)
}

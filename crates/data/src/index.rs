//! The dataset index: the samples of one split and how their labels map to training ids.

use crate::error::DataError;
use crate::labels::LabelMap;
use crate::layout::{Layout, SampleEntry};

/// The samples of one split, in a machine-independent order, with their label mapping.
#[derive(Debug, Clone)]
pub struct DatasetIndex {
    split: String,
    samples: Vec<SampleEntry>,
    labels: LabelMap,
}

impl DatasetIndex {
    /// Scans `split` of `layout`. Fails on the first problem found (a missing label, an
    /// unreadable folder, a bad list line) or an empty split; `scan_split` lists them all.
    pub fn new(layout: &Layout, split: &str, ignore_index: u8) -> Result<Self, DataError> {
        let scan = layout.scan(split);
        if let Some(problem) = scan.problems.into_iter().next() {
            return Err(problem);
        }
        let encoding = scan.encoding.unwrap_or_else(|| layout.encoding());
        Ok(Self {
            split: split.to_string(),
            samples: scan.samples,
            labels: LabelMap::new(&encoding, ignore_index)?,
        })
    }

    /// An index over given samples, e.g. for a hand-made subset.
    pub fn from_samples(
        split: impl Into<String>,
        samples: Vec<SampleEntry>,
        labels: LabelMap,
    ) -> Result<Self, DataError> {
        let split = split.into();
        if samples.is_empty() {
            return Err(DataError::EmptySplit {
                split,
                detail: "no sample was given".to_string(),
            });
        }
        Ok(Self {
            split,
            samples,
            labels,
        })
    }

    /// The split this index covers.
    pub fn split(&self) -> &str {
        &self.split
    }

    /// The samples, in index order.
    pub fn samples(&self) -> &[SampleEntry] {
        &self.samples
    }

    /// How labels map to training ids, and the class names.
    pub fn label_map(&self) -> &LabelMap {
        &self.labels
    }

    /// How many samples the split has.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the split has no sample (never true for an index built by [`DatasetIndex::new`]).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

impl burn_dataset::Dataset<SampleEntry> for DatasetIndex {
    fn get(&self, index: usize) -> Option<SampleEntry> {
        self.samples.get(index).cloned()
    }

    fn len(&self) -> usize {
        self.samples.len()
    }
}

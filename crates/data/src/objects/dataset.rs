//! Samples and batches of objects: decode, extract objects, resize to the model's square input,
//! draw which objects an image contributes this epoch.
//!
//! A sample is a pure function of `(seed, epoch, index)`: its generator is the data crate's
//! [`SplitMix64::for_sample`], drawing the flip first and then the objects, so a resumed run
//! sees the very objects an uninterrupted one would.

use std::path::PathBuf;

use super::components::connected_components;
use super::config::{ObjectDataConfig, ObjectSource};
use super::error::ObjectError;
use super::index::{ObjectFiles, ObjectIndex};
use super::mask::ObjectMask;
use super::read::read_id_map;
use crate::augment::{resize_square, Normaliser};
use crate::decode::{read_image_with, read_label, Orientation, RgbImage};
use crate::error::DataError;
use crate::rng::{epoch_permutation, SplitMix64};

/// One image with its objects at the model's input size.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectSample {
    pub name: String,
    /// Position in the index.
    pub index: usize,
    /// `[3, S, S]` normalised RGB; `None` with cached embeddings.
    pub image: Option<Vec<f32>>,
    pub embedding: Option<PathBuf>,
    /// `S × S` masks, none of them empty.
    pub masks: Vec<ObjectMask>,
    pub flipped: bool,
}

/// The objects of several images, flattened for the trainer.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectBatch {
    /// The square input size `S`.
    pub size: usize,
    pub names: Vec<String>,
    /// Index positions of the images.
    pub indices: Vec<usize>,
    /// `[N, 3, S, S]` normalised RGB, or `None` with cached embeddings.
    pub images: Option<Vec<f32>>,
    /// One per image, with cached embeddings.
    pub embeddings: Vec<PathBuf>,
    /// `[K, S, S]` 0/1 masks of all objects.
    pub masks: Vec<u8>,
    /// For each object, the image (0..N) it belongs to.
    pub object_image: Vec<usize>,
    /// For each object, its class / instance id.
    pub object_ids: Vec<u32>,
}

impl ObjectBatch {
    /// Number of images.
    pub fn num_images(&self) -> usize {
        self.names.len()
    }

    /// Number of objects.
    pub fn num_objects(&self) -> usize {
        self.object_image.len()
    }

    fn from_samples(samples: Vec<ObjectSample>, size: usize) -> Self {
        let cached = samples.iter().all(|s| s.image.is_none());
        let mut batch = ObjectBatch {
            size,
            names: Vec::new(),
            indices: Vec::new(),
            images: (!cached).then(Vec::new),
            embeddings: Vec::new(),
            masks: Vec::new(),
            object_image: Vec::new(),
            object_ids: Vec::new(),
        };
        for (position, sample) in samples.into_iter().enumerate() {
            batch.names.push(sample.name);
            batch.indices.push(sample.index);
            if let (Some(images), Some(image)) = (&mut batch.images, sample.image) {
                images.extend(image);
            }
            batch.embeddings.extend(sample.embedding);
            for mask in sample.masks {
                batch.masks.extend(mask.pixels);
                batch.object_image.push(position);
                batch.object_ids.push(mask.id);
            }
        }
        batch
    }
}

/// A split's objects at the model's input size.
#[derive(Debug, Clone)]
pub struct ObjectDataset {
    index: ObjectIndex,
    config: ObjectDataConfig,
    size: usize,
    seed: u64,
    normaliser: Normaliser,
    keep_class: Vec<bool>,
}

impl ObjectDataset {
    /// The objects of `split`, resized to `size × size` (the model's input), with `seed`
    /// fixing the epoch orders, flips and object draws.
    pub fn new(
        config: &ObjectDataConfig,
        split: &str,
        size: usize,
        seed: u64,
    ) -> Result<Self, ObjectError> {
        config.check()?;
        if size == 0 {
            return Err(ObjectError::Config {
                field: "model.image_size".to_string(),
                message: "must be at least 1".to_string(),
            });
        }
        let index = ObjectIndex::new(config, split)?;
        let mut keep_class = vec![true; 256];
        if let (
            ObjectSource::SemanticComponents {
                classes: Some(names),
                ..
            },
            Some(labels),
        ) = (&config.source, index.label_map())
        {
            keep_class = vec![false; 256];
            for name in names {
                let Some(class) = labels.classes().iter().position(|c| c == name) else {
                    return Err(ObjectError::Config {
                        field: "data.source.classes".to_string(),
                        message: format!(
                            "no class `{name}` in {}; classes: {}",
                            labels.description(),
                            labels.classes().join(", ")
                        ),
                    });
                };
                keep_class[class] = true;
            }
        }
        Ok(Self {
            index,
            normaliser: Normaliser::new(config.mean, config.std),
            config: config.clone(),
            size,
            seed,
            keep_class,
        })
    }

    pub fn index(&self) -> &ObjectIndex {
        &self.index
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The square input size.
    pub fn size(&self) -> usize {
        self.size
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Whole training batches per epoch (an incomplete last batch is dropped).
    pub fn batches_per_epoch(&self) -> usize {
        self.len() / self.config.batch_size
    }

    /// The image order of `epoch` (index order without shuffling).
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        if self.config.shuffle {
            epoch_permutation(self.seed, epoch, self.len())
        } else {
            (0..self.len()).collect()
        }
    }

    /// Training batch `batch` of `epoch`.
    pub fn train_batch(&self, epoch: u64, batch: usize) -> Result<ObjectBatch, ObjectError> {
        let batches = self.batches_per_epoch();
        if batch >= batches {
            return Err(DataError::BatchOutOfRange { batch, batches }.into());
        }
        let order = self.epoch_order(epoch);
        let size = self.config.batch_size;
        let samples = order[batch * size..(batch + 1) * size]
            .iter()
            .map(|&index| self.train_sample(epoch, index))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ObjectBatch::from_samples(samples, self.size))
    }

    /// Image `index` with every object (up to `eval_objects_per_image`), unflipped.
    pub fn eval_batch(&self, index: usize) -> Result<ObjectBatch, ObjectError> {
        let mut sample = self.load(index, false)?;
        sample.masks.truncate(self.config.eval_objects_per_image);
        Ok(ObjectBatch::from_samples(vec![sample], self.size))
    }

    /// Image `index` as drawn in `epoch`: maybe flipped, up to `objects_per_image` objects.
    pub fn train_sample(&self, epoch: u64, index: usize) -> Result<ObjectSample, ObjectError> {
        let mut rng = SplitMix64::for_sample(self.seed, epoch, index as u64);
        let flip = rng.coin() && self.config.flip;
        let mut sample = self.load(index, flip)?;
        // A partial Fisher–Yates draw: the first k objects of a random order, without repeats.
        let masks = &mut sample.masks;
        let take = self.config.objects_per_image.min(masks.len());
        for i in 0..take {
            let j = i + rng.below((masks.len() - i) as u64) as usize;
            masks.swap(i, j);
        }
        masks.truncate(take);
        Ok(sample)
    }

    /// Image `index` with all its objects, resized (and mirrored when `flip`).
    pub fn load(&self, index: usize, flip: bool) -> Result<ObjectSample, ObjectError> {
        let entry = &self.index.entries()[index];
        let image = if entry.embedding.is_none() {
            // As stored, as the official SAM 2 loader (Pillow, no EXIF transpose) reads it.
            Some(read_image_with(&entry.image, Orientation::AsStored)?)
        } else {
            None
        };
        let masks = self.objects(index, image.as_ref())?;
        let size = self.size;
        let masks = masks
            .into_iter()
            .map(|m| m.resized(size, flip))
            .filter(|m| m.area() > 0)
            .collect();
        let image = image.map(|image| resize_square(&image, self.size, &self.normaliser, flip));
        Ok(ObjectSample {
            name: entry.name.clone(),
            index,
            image,
            embedding: entry.embedding.clone(),
            masks,
            flipped: flip,
        })
    }

    /// The objects of image `index` at the original resolution.
    pub fn objects(
        &self,
        index: usize,
        image: Option<&RgbImage>,
    ) -> Result<Vec<ObjectMask>, ObjectError> {
        let entry = &self.index.entries()[index];
        let check_size = |path: &PathBuf, width: usize, height: usize| match image {
            Some(image) if (image.width, image.height) != (width, height) => {
                Err(ObjectError::MaskSize {
                    mask: path.clone(),
                    image: entry.image.clone(),
                    mask_width: width,
                    mask_height: height,
                    image_width: image.width,
                    image_height: image.height,
                })
            }
            _ => Ok(()),
        };
        match (&entry.objects, &self.config.source) {
            (
                ObjectFiles::Semantic(path),
                ObjectSource::SemanticComponents {
                    min_area,
                    connectivity,
                    ignore_index,
                    ..
                },
            ) => {
                let labels = self.index.label_map().ok_or_else(|| ObjectError::Config {
                    field: "data.source".to_string(),
                    message: "a semantic source without a label map".to_string(),
                })?;
                let label = read_label(path, labels)?;
                if let Some(image) = image {
                    if (image.width, image.height) != (label.width, label.height) {
                        return Err(DataError::SizeMismatch {
                            image: entry.image.clone(),
                            label: path.clone(),
                            image_width: image.width,
                            image_height: image.height,
                            label_width: label.width,
                            label_height: label.height,
                        }
                        .into());
                    }
                }
                let keep = |class: u8| self.keep_class[usize::from(class)];
                Ok(connected_components(
                    &label.pixels,
                    label.width,
                    label.height,
                    *ignore_index,
                    *connectivity,
                    (*min_area).max(1),
                    &keep,
                ))
            }
            (
                ObjectFiles::Instances(path),
                ObjectSource::InstanceMasks {
                    min_area,
                    ignore_value,
                    ..
                },
            ) => {
                let map = read_id_map(path)?;
                check_size(path, map.width, map.height)?;
                let mut ids: Vec<u32> = map
                    .ids
                    .iter()
                    .copied()
                    .filter(|&v| v != 0 && Some(v) != *ignore_value)
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                Ok(ids
                    .into_iter()
                    .map(|id| {
                        let pixels = map.ids.iter().map(|&v| u8::from(v == id)).collect();
                        ObjectMask::new(map.width, map.height, pixels, id)
                    })
                    .filter(|m| m.area() >= (*min_area).max(1))
                    .collect())
            }
            (ObjectFiles::MaskFiles(paths), ObjectSource::ObjectMaskFolders { min_area, .. }) => {
                let mut masks = Vec::with_capacity(paths.len());
                for (position, path) in paths.iter().enumerate() {
                    let map = read_id_map(path)?;
                    check_size(path, map.width, map.height)?;
                    let pixels = map.ids.iter().map(|&v| u8::from(v != 0)).collect();
                    let mask = ObjectMask::new(map.width, map.height, pixels, position as u32);
                    if mask.area() >= (*min_area).max(1) {
                        masks.push(mask);
                    }
                }
                Ok(masks)
            }
            _ => Err(ObjectError::Config {
                field: "data.source".to_string(),
                message: "the index does not match the configured source".to_string(),
            }),
        }
    }
}

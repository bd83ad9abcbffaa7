//! Loader tests: determinism across worker counts and resume points, batch contents, errors.

use super::*;
use crate::test_support::{cityscapes, fixture_colour, small_config, write_png};
use crate::{DatasetIndex, Layout};

fn dataset(count: usize) -> (tempfile::TempDir, DataConfig) {
    let dir = tempfile::tempdir().expect("temp dir");
    cityscapes(dir.path(), "train", "bremen", count, 40, 20);
    let mut config = small_config(Layout::Cityscapes {
        root: dir.path().to_path_buf(),
    });
    // No border clearing, so every label change has an edge (used by the alignment test).
    config.edges.pad = false;
    (dir, config)
}

fn loader(config: &DataConfig, mode: Mode, workers: usize, seed: u64) -> Loader {
    let mut config = config.clone();
    config.train_loader.num_workers = workers;
    config.val_loader.num_workers = workers;
    let index = DatasetIndex::new(&config.layout, config.split(mode), 255).expect("index");
    Loader::new(index, &config, mode, seed).expect("loader")
}

fn epoch(loader: &Loader, epoch: u64, start: usize) -> Vec<Batch> {
    loader
        .epoch_iter(epoch, start)
        .collect::<Result<_, _>>()
        .expect("clean epoch")
}

/// Equality down to the bits of every float (`==` would accept -0.0 for 0.0).
fn assert_identical(a: &[Batch], b: &[Batch]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            (x.epoch, x.index, &x.names, &x.sample_indices),
            (y.epoch, y.index, &y.names, &y.sample_indices)
        );
        assert_eq!(x.labels, y.labels);
        assert_eq!(x.edges, y.edges);
        assert!(x
            .images
            .iter()
            .zip(&y.images)
            .all(|(p, q)| p.to_bits() == q.to_bits()));
        assert_eq!(x.images.len(), y.images.len());
    }
}

#[test]
fn batches_are_bit_identical_for_any_worker_count() {
    let (_dir, config) = dataset(10);
    let one = loader(&config, Mode::Train, 1, 304);
    let reference: Vec<Vec<Batch>> = (0..2).map(|e| epoch(&one, e, 0)).collect();
    assert_eq!(reference[0].len(), 3, "10 samples, batch 3, drop_last");
    for workers in [2, 4, 8] {
        let many = loader(&config, Mode::Train, workers, 304);
        for (e, expected) in reference.iter().enumerate() {
            assert_identical(&epoch(&many, e as u64, 0), expected);
        }
    }
    // Different epochs and seeds really are different.
    assert_ne!(
        reference[0][0].sample_indices,
        reference[1][0].sample_indices
    );
    let other_seed = epoch(&loader(&config, Mode::Train, 2, 305), 0, 0);
    assert_ne!(other_seed[0].labels, reference[0][0].labels);
}

#[test]
fn a_loader_started_mid_epoch_continues_with_the_same_batches() {
    let (_dir, config) = dataset(10);
    let full = epoch(&loader(&config, Mode::Train, 1, 9), 3, 0);
    for (workers, start) in [(1, 1), (4, 2), (3, 3)] {
        let resumed = epoch(&loader(&config, Mode::Train, workers, 9), 3, start);
        assert_identical(&resumed, &full[start..]);
        assert_eq!(
            resumed.first().map(|b| b.index),
            full.get(start).map(|b| b.index)
        );
    }
    // The synchronous path gives the same batch too.
    let single = loader(&config, Mode::Train, 1, 9)
        .load_batch(3, 2)
        .expect("batch");
    assert_identical(&[single], &full[2..]);
}

#[test]
fn drop_last_and_validation_batches_cover_what_they_should() {
    let (_dir, mut config) = dataset(7);
    config.val_split = "train".to_string();
    config.val_loader.batch_size = 3;
    let train = loader(&config, Mode::Train, 2, 1);
    assert_eq!(train.batches_per_epoch(), 2);
    let val = loader(&config, Mode::Validation, 2, 1);
    assert_eq!(val.batches_per_epoch(), 3);
    let batches = epoch(&val, 0, 0);
    let sizes: Vec<usize> = batches.iter().map(|b| b.batch_size).collect();
    assert_eq!(sizes, [3, 3, 1]);
    let order: Vec<usize> = batches
        .iter()
        .flat_map(|b| b.sample_indices.clone())
        .collect();
    assert_eq!(
        order,
        (0..7).collect::<Vec<_>>(),
        "validation reads in index order"
    );
    assert_eq!(batches[0].image_shape(), [3, 3, 20, 40], "full resolution");
    assert_eq!(batches[2].labels.len(), 20 * 40);
    assert!(
        train.epoch_iter(0, 2).next().is_none(),
        "start past the end: nothing"
    );
    assert!(matches!(
        train.load_batch(0, 2),
        Err(DataError::BatchOutOfRange {
            batch: 2,
            batches: 2
        })
    ));
}

#[test]
fn training_batches_keep_image_label_and_edges_aligned() {
    let (_dir, config) = dataset(6);
    // labelId -> trainId of the fixture stripes: the colour of a pixel names its class.
    let raw_of_train_id = |t: u8| match t {
        0 => 7,
        1 => 8,
        2 => 11,
        13 => 26,
        other => panic!("unexpected trainId {other}"),
    };
    let normaliser = Normaliser::new(config.augment.mean, config.augment.std);
    let loader = loader(&config, Mode::Train, 2, 42);
    let mut checked = 0usize;
    let mut edge_pixels = 0usize;
    for e in 0..3 {
        for batch in epoch(&loader, e, 0) {
            assert_eq!(batch.image_shape(), [3, 3, 16, 24], "exact crop size");
            let plane = 16 * 24;
            for n in 0..batch.batch_size {
                for p in 0..plane {
                    let label = batch.labels[n * plane + p];
                    let edge = batch.edges[n * plane + p];
                    assert!(edge <= 1);
                    edge_pixels += usize::from(edge);
                    assert!(matches!(label, 0 | 1 | 2 | 13 | 255), "label {label}");
                    if label == 255 || edge == 1 {
                        // Padding, void, or a boundary where bilinear mixes colours.
                        continue;
                    }
                    let colour = fixture_colour(raw_of_train_id(label));
                    for (c, &channel_value) in colour.iter().enumerate() {
                        let value = batch.images[(n * 3 + c) * plane + p];
                        assert_eq!(
                            value,
                            normaliser.value(c, channel_value),
                            "sample {n} pixel {p}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "enough interior pixels checked: {checked}");
    assert!(
        edge_pixels > 100,
        "the stripes have boundaries: {edge_pixels}"
    );
}

#[test]
fn switching_flip_off_mirrors_exactly_the_flipped_samples() {
    let (_dir, config) = dataset(6);
    let mut no_flip = config.clone();
    no_flip.augment.flip = false;
    let flipped = epoch(&loader(&config, Mode::Train, 2, 5), 0, 0);
    let plain = epoch(&loader(&no_flip, Mode::Train, 2, 5), 0, 0);
    let (h, w) = (16, 24);
    let mut mirrored = 0;
    for (a, b) in flipped.iter().zip(&plain) {
        for n in 0..a.batch_size {
            let label = |batch: &Batch, y: usize, x: usize| batch.labels[n * h * w + y * w + x];
            let same = (0..h).all(|y| (0..w).all(|x| label(a, y, x) == label(b, y, x)));
            let mirror = (0..h).all(|y| (0..w).all(|x| label(a, y, x) == label(b, y, w - 1 - x)));
            let edges_mirror = (0..h).all(|y| {
                (0..w).all(|x| {
                    a.edges[n * h * w + y * w + x] == b.edges[n * h * w + y * w + w - 1 - x]
                })
            });
            let image_mirror = (0..3).all(|c| {
                (0..h).all(|y| {
                    (0..w).all(|x| {
                        a.images[((n * 3 + c) * h + y) * w + x]
                            == b.images[((n * 3 + c) * h + y) * w + w - 1 - x]
                    })
                })
            });
            assert!(
                same || (mirror && edges_mirror && image_mirror),
                "sample {n} of batch {}",
                a.index
            );
            mirrored += usize::from(!same);
        }
    }
    assert!(mirrored > 0, "some samples were flipped");
}

#[test]
fn a_broken_file_ends_the_epoch_with_its_name_and_no_hang() {
    let (dir, config) = dataset(9);
    let loader = loader(&config, Mode::Train, 3, 11);
    let order = loader.epoch_order(0);
    // Break the first sample of batch 1.
    let victim = loader.dataset().samples()[order[3]].image.clone();
    std::fs::write(&victim, b"\x89PNG\r\n\x1a\nthis is not the rest of a png").expect("write");
    let results: Vec<_> = loader.epoch_iter(0, 0).collect();
    assert_eq!(results.len(), 2, "batch 0, then the error, then nothing");
    assert!(results[0].is_ok());
    let error = results[1].as_ref().expect_err("batch 1 is broken");
    assert_eq!(error.path(), Some(victim.as_path()));
    assert!(error.to_string().contains(&victim.display().to_string()));
    drop(dir);
}

#[test]
fn dropping_the_iterator_early_stops_the_workers() {
    let (_dir, config) = dataset(12);
    let loader = loader(&config, Mode::Train, 4, 2);
    let started = std::time::Instant::now();
    for _ in 0..20 {
        let mut iter = loader.epoch_iter(0, 0);
        let first = iter.next().expect("one batch").expect("ok");
        assert_eq!(first.index, 0);
        assert_eq!(iter.position(), 1);
        drop(iter); // joins the workers; a leak or deadlock would hang here
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn validation_of_mixed_sizes_needs_batch_size_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (stem, w) in [("a", 8), ("b", 12)] {
        write_png(
            &dir.path().join(format!("img/{stem}.png")),
            w,
            4,
            3,
            &vec![50; w * 12],
        );
        write_png(
            &dir.path().join(format!("mask/{stem}.png")),
            w,
            4,
            1,
            &vec![1; w * 4],
        );
    }
    let mut config = small_config(Layout::folder_pair(
        dir.path().join("img"),
        dir.path().join("mask"),
        vec!["a".into(), "b".into()],
    ));
    let sizes = |config: &DataConfig| -> Result<Vec<usize>, DataError> {
        let batches: Result<Vec<Batch>, _> = loader(config, Mode::Validation, 2, 0)
            .epoch_iter(0, 0)
            .collect();
        Ok(batches?.iter().map(|b| b.width).collect())
    };
    assert_eq!(sizes(&config).expect("batch 1"), [8, 12]);
    config.val_loader.batch_size = 2;
    let error = sizes(&config).expect_err("mixed sizes in one batch");
    assert!(
        matches!(
            error,
            DataError::BatchShape {
                first_width: 8,
                other_width: 12,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn size_mismatch_between_image_and_label_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_png(&dir.path().join("img/a.png"), 8, 4, 3, &[0; 96]);
    write_png(&dir.path().join("mask/a.png"), 8, 5, 1, &[0; 40]);
    let config = small_config(Layout::folder_pair(
        dir.path().join("img"),
        dir.path().join("mask"),
        vec!["a".into()],
    ));
    let error = loader(&config, Mode::Validation, 1, 0)
        .load_batch(0, 0)
        .expect_err("8x4 image, 8x5 label");
    let text = error.to_string();
    assert!(text.contains("is 8x4") && text.contains("is 8x5"), "{text}");
    assert!(
        text.contains("img/a.png") && text.contains("mask/a.png"),
        "{text}"
    );
}

#[test]
fn the_index_is_a_burn_dataset() {
    use burn_dataset::Dataset;
    let (_dir, config) = dataset(3);
    let index = DatasetIndex::new(&config.layout, "train", 255).expect("index");
    assert_eq!(Dataset::len(&index), 3);
    let entry = index.get(1).expect("entry 1");
    assert_eq!(entry.name, "bremen_000001_000019");
    assert!(index.get(3).is_none());
    assert_eq!(index.iter().count(), 3);
}

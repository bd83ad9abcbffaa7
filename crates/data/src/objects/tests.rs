//! Object extraction and sampling on the bundled sample, instance maps and mask folders.

use std::path::{Path, PathBuf};

use super::*;
use crate::layout::Layout;
use crate::test_support::{write_png, write_png_with};

fn sample_config() -> ObjectDataConfig {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/sample");
    ObjectDataConfig {
        source: ObjectSource::SemanticComponents {
            layout: Layout::Cityscapes { root },
            min_area: 200,
            connectivity: Connectivity::Four,
            classes: None,
            ignore_index: 255,
        },
        batch_size: 4,
        prefetch: 0,
        ..ObjectDataConfig::default()
    }
}

#[test]
fn sample_objects_are_components_of_one_class_above_min_area() {
    let config = sample_config();
    let dataset = ObjectDataset::new(&config, "train", 64, 3).expect("sample indexes");
    assert_eq!(dataset.len(), 48);
    assert_eq!(dataset.batches_per_epoch(), 12);
    let objects = dataset.objects(0, None).expect("objects");
    assert!(objects.len() >= 3, "{} objects", objects.len());
    let labels = dataset.index().label_map().expect("semantic").clone();
    let label = crate::decode::read_label(&dataset.index().entries()[0].objects_path(), &labels)
        .expect("label");
    for object in &objects {
        assert!(object.area() >= 200);
        // Every object pixel has the object's class, and objects never overlap.
        for (pixel, &inside) in object.pixels.iter().enumerate() {
            if inside == 1 {
                assert_eq!(u32::from(label.pixels[pixel]), object.id);
            }
        }
    }
    let covered: usize = objects.iter().map(ObjectMask::area).sum();
    let mut union = vec![0u8; label.pixels.len()];
    for object in &objects {
        for (u, &p) in union.iter_mut().zip(&object.pixels) {
            *u += p;
        }
    }
    assert!(union.iter().all(|&n| n <= 1));
    assert_eq!(covered, union.iter().filter(|&&n| n == 1).count());
}

trait ObjectsPath {
    fn objects_path(&self) -> PathBuf;
}

impl ObjectsPath for ObjectEntry {
    fn objects_path(&self) -> PathBuf {
        match &self.objects {
            ObjectFiles::Semantic(p) | ObjectFiles::Instances(p) => p.clone(),
            ObjectFiles::MaskFiles(files) => files[0].clone(),
        }
    }
}

#[test]
fn batches_are_a_pure_function_of_seed_epoch_and_position() {
    let config = sample_config();
    let dataset = ObjectDataset::new(&config, "train", 64, 3).expect("dataset");
    let a = dataset.train_batch(1, 2).expect("batch");
    let b = dataset.train_batch(1, 2).expect("batch");
    assert_eq!(a, b);
    assert_ne!(a, dataset.train_batch(2, 2).expect("batch"));
    assert_eq!(a.num_images(), 4);
    assert!(a.num_objects() <= 4 * config.objects_per_image);
    assert_eq!(a.masks.len(), a.num_objects() * 64 * 64);
    assert_eq!(a.images.as_ref().map(Vec::len), Some(4 * 3 * 64 * 64));
    // The background thread yields exactly the batches built in line, from any position.
    let loader = ObjectLoader::new(dataset.clone(), 2);
    let prefetched: Vec<ObjectBatch> = loader
        .epoch_iter(1, 2)
        .take(3)
        .collect::<Result<_, _>>()
        .expect("prefetched");
    assert_eq!(prefetched[0], a);
    assert_eq!(prefetched[2], dataset.train_batch(1, 4).expect("batch"));
    // Dropping an iterator midway stops its thread without hanging.
    let mut early = loader.epoch_iter(0, 0);
    assert!(early.next().is_some());
    drop(early);
}

#[test]
fn flipped_samples_mirror_image_and_masks() {
    let config = sample_config();
    let dataset = ObjectDataset::new(&config, "train", 32, 3).expect("dataset");
    let plain = dataset.load(5, false).expect("plain");
    let flipped = dataset.load(5, true).expect("flipped");
    assert_eq!(plain.masks.len(), flipped.masks.len());
    for (p, f) in plain.masks.iter().zip(&flipped.masks) {
        for y in 0..32 {
            for x in 0..32 {
                assert_eq!(p.pixels[y * 32 + x], f.pixels[y * 32 + 31 - x]);
            }
        }
    }
    let (p, f) = (plain.image.expect("image"), flipped.image.expect("image"));
    assert_eq!(p[3 * 32 + 2], f[3 * 32 + 29]);
}

#[test]
fn class_filter_and_unknown_class_names() {
    let mut config = sample_config();
    if let ObjectSource::SemanticComponents { classes, .. } = &mut config.source {
        *classes = Some(vec!["car".to_string(), "person".to_string()]);
    }
    let dataset = ObjectDataset::new(&config, "train", 32, 3).expect("dataset");
    let ids: Vec<u32> = (0..dataset.len())
        .flat_map(|i| dataset.objects(i, None).expect("objects"))
        .map(|m| m.id)
        .collect();
    assert!(!ids.is_empty());
    // trainIds: person 11, car 13.
    assert!(ids.iter().all(|&id| id == 11 || id == 13), "{ids:?}");

    if let ObjectSource::SemanticComponents { classes, .. } = &mut config.source {
        *classes = Some(vec!["cra".to_string()]);
    }
    let error = ObjectDataset::new(&config, "train", 32, 3)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("data.source.classes") && error.contains("`cra`"),
        "{error}"
    );
}

fn unicode_root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("données d'essai").join("数据");
    (dir, root)
}

#[test]
fn instance_maps_in_16_bit_with_ignore_and_min_area() {
    let (_dir, root) = unicode_root();
    let (w, h) = (8usize, 6usize);
    write_png(
        &root.join("train/images/a.png"),
        w,
        h,
        3,
        &vec![90u8; w * h * 3],
    );
    // Instance 1000 (12 px), instance 70000 would not fit 16 bits: use 4242 (2 px), and 255.
    let mut ids = vec![0u16; w * h];
    for y in 0..3 {
        for x in 0..4 {
            ids[y * w + x] = 1000;
        }
    }
    ids[5 * w + 7] = 4242;
    ids[5 * w + 6] = 4242;
    ids[4 * w] = 255;
    let bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_be_bytes()).collect();
    write_png_with(
        &root.join("train/instances/a.png"),
        w,
        h,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        None,
        &bytes,
    );
    let config = ObjectDataConfig {
        source: ObjectSource::InstanceMasks {
            images: root.join("{split}/images"),
            instances: root.join("{split}/instances"),
            min_area: 2,
            ignore_value: Some(255),
        },
        batch_size: 1,
        ..ObjectDataConfig::default()
    };
    let dataset = ObjectDataset::new(&config, "train", 8, 1).expect("dataset");
    let objects = dataset.objects(0, None).expect("objects");
    let summary: Vec<(u32, usize)> = objects.iter().map(|m| (m.id, m.area())).collect();
    assert_eq!(summary, [(1000, 12), (4242, 2)]);
    assert_eq!(
        objects[0].bounding_box(),
        Some(PixelBox {
            x0: 0,
            y0: 0,
            x1: 3,
            y1: 2
        })
    );

    // A missing instance map names the file it expected, under the unicode folder.
    write_png(
        &root.join("train/images/b.png"),
        w,
        h,
        3,
        &vec![0u8; w * h * 3],
    );
    let error = ObjectDataset::new(&config, "train", 8, 1).unwrap_err();
    assert!(
        matches!(error, ObjectError::MissingObjects { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("数据"), "{error}");
    assert!(error.to_string().contains("b.png"), "{error}");
}

#[test]
fn mask_folders_allow_overlaps_and_check_sizes() {
    let (_dir, root) = unicode_root();
    let (w, h) = (6usize, 4usize);
    write_png(
        &root.join("images/img.jpg.png"),
        w,
        h,
        3,
        &vec![10u8; w * h * 3],
    );
    let mut first = vec![0u8; w * h];
    let mut second = vec![0u8; w * h];
    first[..12].fill(255);
    second[6..18].fill(1);
    write_png(&root.join("masks/img.jpg/0.png"), w, h, 1, &first);
    write_png(&root.join("masks/img.jpg/1.png"), w, h, 1, &second);
    let config = ObjectDataConfig {
        source: ObjectSource::ObjectMaskFolders {
            images: root.join("images"),
            masks: root.join("masks"),
            min_area: 1,
        },
        batch_size: 1,
        objects_per_image: 1,
        ..ObjectDataConfig::default()
    };
    let dataset = ObjectDataset::new(&config, "train", 4, 1).expect("dataset");
    let objects = dataset.objects(0, None).expect("objects");
    assert_eq!(objects.len(), 2);
    assert_eq!((objects[0].area(), objects[1].area()), (12, 12));
    // objects_per_image caps the draw; the eval batch has them all.
    assert_eq!(dataset.train_batch(0, 0).expect("batch").num_objects(), 1);
    assert_eq!(dataset.eval_batch(0).expect("eval").num_objects(), 2);

    // The index lists mask files when it is built: a new dataset sees the misfit.
    write_png(&root.join("masks/img.jpg/2.png"), 3, 3, 1, &[1u8; 9]);
    let dataset = ObjectDataset::new(&config, "train", 4, 1).expect("dataset");
    let error = dataset.eval_batch(0).unwrap_err();
    assert!(matches!(error, ObjectError::MaskSize { .. }), "{error}");
    assert!(error.to_string().contains("2.png"), "{error}");
}

#[test]
fn cached_embeddings_must_exist_and_exclude_flips() {
    let mut config = sample_config();
    let dir = tempfile::tempdir().expect("tempdir");
    config.embeddings = Some(dir.path().join("{split}"));
    let error = ObjectDataset::new(&config, "val", 32, 1)
        .unwrap_err()
        .to_string();
    assert!(error.contains("data.flip"), "{error}");
    config.flip = false;
    let error = ObjectDataset::new(&config, "val", 32, 1).unwrap_err();
    assert!(
        matches!(error, ObjectError::MissingEmbedding { .. }),
        "{error}"
    );
    assert!(error.to_string().contains(".safetensors"), "{error}");
    // With every file present, no image is decoded.
    let index = ObjectIndex::new(&sample_config(), "val").expect("index");
    std::fs::create_dir_all(dir.path().join("val")).expect("mkdir");
    for entry in index.entries() {
        let file = dir
            .path()
            .join("val")
            .join(format!("{}.safetensors", entry.name));
        std::fs::write(file, b"not read by the data crate").expect("write");
    }
    let dataset = ObjectDataset::new(&config, "val", 32, 1).expect("dataset");
    let batch = dataset.eval_batch(0).expect("batch");
    assert!(batch.images.is_none());
    assert_eq!(batch.embeddings.len(), 1);
    assert!(batch.num_objects() > 0);
}

//! Scanning, clip sampling and reading on tiny videos written to a folder whose name has a
//! space and a non-ASCII letter; and the errors a user can run into.

use std::path::{Path, PathBuf};

use super::*;
use crate::rng::SplitMix64;
use crate::test_support::{write_png, write_png_with};

mod errors;
mod loader;

pub(super) const W: usize = 8;
pub(super) const H: usize = 6;

pub(super) fn root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("vos daten ü");
    (dir, root)
}

/// Frame `t` of any video: every pixel `(20 t, 100, 7)`, so a pixel says which frame it is.
pub(super) fn write_frame(root: &Path, video: &str, stem: &str, t: usize) {
    let pixels: Vec<u8> = (0..W * H).flat_map(|_| [20 * t as u8, 100, 7]).collect();
    let path = root
        .join("JPEGImages")
        .join(video)
        .join(format!("{stem}.png"));
    write_png(&path, W, H, 3, &pixels);
}

/// An id map where object `id` fills column `id` (so objects never overlap).
pub(super) fn ids_with(objects: &[u8]) -> Vec<u8> {
    let mut ids = vec![0u8; W * H];
    for &id in objects {
        for y in 0..H {
            ids[y * W + usize::from(id) % W] = id;
        }
    }
    ids
}

pub(super) fn write_palette_annotation(root: &Path, video: &str, stem: &str, ids: &[u8]) {
    let palette: Vec<u8> = (0..=255u8).flat_map(|i| [i, 255 - i, i / 2]).collect();
    let path = root
        .join("Annotations")
        .join(video)
        .join(format!("{stem}.png"));
    write_png_with(
        &path,
        W,
        H,
        png::ColorType::Indexed,
        png::BitDepth::Eight,
        Some(palette),
        ids,
    );
}

pub(super) fn write_grey_annotation(root: &Path, video: &str, stem: &str, ids: &[u8]) {
    let path = root
        .join("Annotations")
        .join(video)
        .join(format!("{stem}.png"));
    write_png(&path, W, H, 1, ids);
}

/// `alpha`: 10 frames, palette annotations on all; objects 1 and 2 from the start, 2 leaves
/// after frame 5, 3 enters at frame 4; one void pixel in frame 0.
/// `beta`: 6 frames, grey annotations on all but frame 0; object 5 from frame 1 on.
pub(super) fn two_videos(root: &Path) {
    for t in (0..10).rev() {
        let stem = format!("{t:05}");
        write_frame(root, "alpha", &stem, t);
        let mut objects = vec![1u8];
        if t <= 5 {
            objects.push(2);
        }
        if t >= 4 {
            objects.push(3);
        }
        let mut ids = ids_with(&objects);
        if t == 0 {
            ids[W * H - 1] = VOID;
        }
        write_palette_annotation(root, "alpha", &stem, &ids);
    }
    for t in 0..6 {
        let stem = format!("{t:05}");
        write_frame(root, "beta", &stem, t);
        if t > 0 {
            write_grey_annotation(root, "beta", &stem, &ids_with(&[5]));
        }
    }
}

pub(super) fn clips(
    num_frames: usize,
    max_num_objects: usize,
    reverse_time_prob: f64,
) -> ClipConfig {
    ClipConfig {
        num_frames,
        max_num_objects,
        reverse_time_prob,
    }
}

#[test]
fn scan_sorts_videos_and_frames_and_reads_first_frame_objects() {
    let (_dir, root) = root();
    two_videos(&root);
    let index = VosIndex::new(&VosLayout::new(&root), None).expect("scan");
    let names: Vec<&str> = index.videos().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    let alpha = &index.videos()[0];
    let stems: Vec<&str> = alpha.frames.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(stems[..3], ["00000", "00001", "00002"]);
    assert_eq!((alpha.width, alpha.height), (W, H));
    assert_eq!(alpha.object_ids, [1, 2]);
    assert_eq!(alpha.all_object_ids().expect("ids"), [1, 2, 3]);
    let beta = &index.videos()[1];
    assert_eq!(beta.first_annotated, 1);
    assert_eq!(beta.annotated_positions(), [1, 2, 3, 4, 5]);
    assert_eq!(beta.object_ids, [5]);
    assert!(beta.frames[0].annotation.is_none());
    assert!(alpha
        .first_frame()
        .to_string_lossy()
        .contains("vos daten ü"));
}

#[test]
fn split_files_select_and_sort_videos() {
    let (_dir, root) = root();
    two_videos(&root);
    let list = root.join("ImageSets/2017/val.txt");
    std::fs::create_dir_all(list.parent().expect("parent")).expect("mkdir");
    std::fs::write(&list, "beta\n\n  alpha \nbeta\n").expect("write");
    let index = VosIndex::new(&VosLayout::new(&root), Some("2017/val")).expect("scan");
    assert_eq!(index.split(), Some("2017/val"));
    assert_eq!(index.len(), 2);
    assert_eq!(index.videos()[0].name, "alpha");

    std::fs::write(&list, "beta\ngamma\n").expect("write");
    let error = VosIndex::new(&VosLayout::new(&root), Some("2017/val")).unwrap_err();
    assert!(
        matches!(error, VosError::MissingVideo { line: 2, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("gamma"), "{error}");
    let error = VosIndex::new(&VosLayout::new(&root), Some("train")).unwrap_err();
    assert!(
        matches!(error, VosError::MissingSplitFile { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("train.txt"), "{error}");
}

#[test]
fn clips_hold_frames_masks_and_void_in_clip_order() {
    let (_dir, root) = root();
    two_videos(&root);
    let index = VosIndex::new(&VosLayout::new(&root), None).expect("scan");
    let alpha = &index.videos()[0];
    let plan = ClipPlan {
        frames: vec![5, 4, 0, 4],
        object_ids: vec![3, 1],
        reversed: true,
    };
    let clip = read_clip(alpha, &plan).expect("clip");
    assert_eq!((clip.num_frames(), clip.num_objects()), (4, 2));
    assert_eq!(clip.images.len(), 4 * H * W * 3);
    assert_eq!(clip.masks.len(), 4 * 2 * H * W);
    assert_eq!(clip.frame_names, ["00005", "00004", "00000", "00004"]);
    for (t, &position) in plan.frames.iter().enumerate() {
        assert_eq!(clip.image(t)[0], 20 * position as u8);
        // Object 3 (slot 0) is column 3 from frame 4 on; object 1 (slot 1) column 1 always.
        let expected_3 = usize::from(position >= 4) * H;
        assert_eq!(
            clip.mask(t, 0).iter().map(|&v| v as usize).sum::<usize>(),
            expected_3
        );
        assert_eq!(clip.mask(t, 1).iter().filter(|&&v| v == 1).count(), H);
        assert_eq!(clip.mask(t, 1)[W + 1], 1);
    }
    assert_eq!(clip.void[2 * W * H + W * H - 1], 1);
    assert_eq!(clip.void.iter().map(|&v| v as usize).sum::<usize>(), 1);

    // The whole video for evaluation: an unannotated frame has empty masks.
    let beta = &index.videos()[1];
    let clip = read_clip(beta, &ClipPlan::whole_video(beta)).expect("eval clip");
    assert_eq!(clip.annotated, [false, true, true, true, true, true]);
    assert!(clip.mask(0, 0).iter().all(|&v| v == 0));
    assert_eq!(clip.mask(1, 0)[5], 1);
}

#[test]
fn sampled_clips_follow_the_official_sampler_and_the_seed() {
    let (_dir, root) = root();
    two_videos(&root);
    let index = VosIndex::new(&VosLayout::new(&root), None).expect("scan");
    let dataset = VosDataset::new(index.clone(), clips(4, 1, 0.5), 11).expect("dataset");
    let mut reversed = 0;
    let mut starts = std::collections::BTreeSet::new();
    for epoch in 0..200 {
        let plan = dataset.plan(epoch, 0).expect("plan");
        let mut sorted = plan.frames.clone();
        sorted.sort_unstable();
        // Four consecutive frames, backwards exactly when reversed.
        assert!(sorted.windows(2).all(|w| w[1] == w[0] + 1), "{plan:?}");
        assert_eq!(plan.frames[0] == sorted[0], !plan.reversed, "{plan:?}");
        reversed += usize::from(plan.reversed);
        starts.insert(sorted[0]);
        // One object, visible in the clip's first frame.
        let first = plan.frames[0];
        assert_eq!(plan.object_ids.len(), 1);
        let visible = if first <= 5 {
            first >= 4 || plan.object_ids[0] != 3
        } else {
            plan.object_ids[0] != 2
        };
        assert!(visible, "{plan:?}");
        // The beta video's clips use annotated frames only.
        assert!(dataset
            .plan(epoch, 1)
            .expect("beta")
            .frames
            .iter()
            .all(|&f| f >= 1));
    }
    assert!((70..130).contains(&reversed), "{reversed}");
    assert_eq!(
        starts.into_iter().collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5, 6]
    );

    // Same seed, same clips, whichever thread reads them; another seed, other clips.
    let clip = dataset.train_clip(3, 1).expect("clip");
    let from_threads: Vec<VosClip> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| dataset.train_clip(3, 1).expect("clip")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(from_threads.iter().all(|c| *c == clip));
    let other = VosDataset::new(index, clips(4, 1, 0.5), 12).expect("dataset");
    let plans = |d: &VosDataset| {
        (0..8)
            .map(|e| d.plan(e, 0).expect("plan"))
            .collect::<Vec<_>>()
    };
    assert_ne!(plans(&dataset), plans(&other));
}

#[test]
fn object_draws_are_uniform_subsets_and_empty_first_frames_are_redrawn() {
    let video = VosVideo {
        name: "table".to_string(),
        frames: (0..6)
            .map(|t| VosFrame {
                name: format!("{t}"),
                image: PathBuf::from(format!("{t}.jpg")),
                annotation: Some(PathBuf::from(format!("{t}.png"))),
            })
            .collect(),
        width: W,
        height: H,
        first_annotated: 0,
        object_ids: vec![],
    };
    // Only frame 2 shows objects: every clip of 3 must start there.
    let visible = |position: usize| {
        Ok(if position == 2 {
            vec![4, 6, 8, 9]
        } else {
            vec![]
        })
    };
    let mut rng = SplitMix64::new(5);
    let mut counts = [0usize; 10];
    for _ in 0..400 {
        let plan = sample_clip(&clips(3, 2, 0.0), &video, &mut rng, visible).expect("plan");
        assert_eq!(plan.frames, [2, 3, 4]);
        assert_eq!(plan.object_ids.len(), 2);
        assert_ne!(plan.object_ids[0], plan.object_ids[1]);
        for id in plan.object_ids {
            counts[id as usize] += 1;
        }
    }
    // Each of the four ids is drawn half the time (expected 200).
    assert!(
        [4, 6, 8, 9]
            .iter()
            .all(|&id| (160..240).contains(&counts[id])),
        "{counts:?}"
    );
    let error = sample_clip(&clips(3, 2, 0.0), &video, &mut rng, |_| Ok(vec![])).unwrap_err();
    assert!(matches!(
        error,
        VosError::NoVisibleObjects {
            tries: MAX_TRIES,
            ..
        }
    ));
    let error = sample_clip(&clips(7, 2, 0.0), &video, &mut rng, visible).unwrap_err();
    assert!(error.to_string().contains("6 annotated frames"), "{error}");
    let error = sample_clip(&clips(3, 2, 1.5), &video, &mut rng, visible).unwrap_err();
    assert!(error.to_string().contains("reverse_time_prob"), "{error}");
}

#[test]
fn jpeg_frames_are_read_as_stored() {
    let (_dir, root) = root();
    for t in 0..2 {
        let path = root.join(format!("JPEGImages/clip/{t}.jpg"));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        image::RgbImage::from_pixel(W as u32, H as u32, image::Rgb([200, 40, 90]))
            .save_with_format(&path, image::ImageFormat::Jpeg)
            .expect("jpeg");
        write_grey_annotation(&root, "clip", &t.to_string(), &ids_with(&[2, 7]));
    }
    let index = VosIndex::new(&VosLayout::new(&root), None).expect("scan");
    let dataset = VosDataset::new(index, clips(2, 3, 0.0), 0).expect("dataset");
    let clip = dataset.eval_clip(0).expect("clip");
    assert_eq!(clip.object_ids, [2, 7]);
    assert!(clip
        .images
        .chunks_exact(3)
        .all(|p| p[0].abs_diff(200) < 8 && p[1].abs_diff(40) < 8));
    assert_eq!(clip.mask(1, 1)[7], 1);
}

//! The VOS sample is deterministic, fast to write, and reads back through segburn-data's VOS
//! reader with the objects it was drawn with.

use segburn_data::vos::{ClipConfig, VosDataset, VosIndex, VosLayout};

use super::*;

#[test]
fn the_sample_is_deterministic_and_reads_back_as_a_vos_dataset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("vos sample ü");
    let started = std::time::Instant::now();
    let bytes = run(&out).expect("write");
    // Release builds take a few milliseconds; the bound only catches a runaway generator.
    assert!(
        started.elapsed().as_secs_f64() < 2.0,
        "{:?}",
        started.elapsed()
    );
    assert!(bytes < 600_000, "{bytes} bytes");
    let again = dir.path().join("again");
    run(&again).expect("write again");
    for file in [
        "JPEGImages/exit/00004.jpg",
        "Annotations/occluder/00009.png",
    ] {
        let a = std::fs::read(out.join(file)).expect("read");
        assert_eq!(a, std::fs::read(again.join(file)).expect("read"), "{file}");
    }

    let layout = VosLayout::new(&out);
    let train = VosIndex::new(&layout, Some("train")).expect("train split");
    let names: Vec<&str> = train.videos().iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["crossing", "drift", "exit"]);
    let val = VosIndex::new(&layout, Some("val")).expect("val split");
    assert_eq!(val.len(), 1);
    let objects: Vec<Vec<u32>> = train
        .videos()
        .iter()
        .map(|v| v.object_ids.clone())
        .collect();
    assert_eq!(objects, [vec![1, 2, 3], vec![1, 2], vec![1, 2]]);
    for video in train.videos().iter().chain(val.videos()) {
        assert_eq!(video.frames.len(), FRAMES);
        assert_eq!((video.width, video.height), (WIDTH, HEIGHT));
    }

    // `exit`'s object 1 leaves the frame; `occluder`'s object 1 is hidden at frame 5.
    let exit = VosDataset::new(train.clone(), ClipConfig::default(), 0).expect("dataset");
    let whole = exit.eval_clip(2).expect("exit");
    let area = |t: usize, k: usize| whole.mask(t, k).iter().filter(|&&v| v == 1).count();
    assert!(area(0, 0) > 300 && area(FRAMES - 1, 0) == 0);
    let val = VosDataset::new(val, ClipConfig::default(), 0).expect("val");
    let whole = val.eval_clip(0).expect("occluder");
    assert_eq!(whole.mask(5, 0).iter().filter(|&&v| v == 1).count(), 0);
    assert!(whole.mask(9, 0).contains(&1));

    // Training clips: 8 consecutive frames, at most 3 objects, each visible in frame 0.
    let clips = ClipConfig {
        reverse_time_prob: 0.5,
        ..ClipConfig::default()
    };
    let dataset = VosDataset::new(train, clips, 3).expect("dataset");
    for epoch in 0..3 {
        for position in 0..dataset.len() {
            let clip = dataset.train_clip(epoch, position).expect("clip");
            assert_eq!(clip.num_frames(), 8);
            assert!((1..=3).contains(&clip.num_objects()));
            assert_eq!(clip.images.len(), 8 * WIDTH * HEIGHT * 3);
            for k in 0..clip.num_objects() {
                assert!(clip.mask(0, k).contains(&1), "{} {k}", clip.video);
            }
        }
    }
}

#[test]
fn the_palette_is_davis() {
    let palette = davis_palette();
    assert_eq!(&palette[..12], [0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0]);
    assert_eq!(palette.len(), 768);
}

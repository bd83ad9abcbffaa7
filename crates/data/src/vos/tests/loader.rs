//! The threaded loader: the same clips in the same order for any number of workers, from any
//! position, and an error ends the epoch.

use super::super::*;
use super::{clips, ids_with, root, two_videos, write_frame, write_palette_annotation};

#[test]
fn the_loader_yields_the_same_clips_for_any_number_of_workers() {
    let (_dir, root) = root();
    two_videos(&root);
    for video in ["gamma", "delta", "epsilon"] {
        for t in 0..5 {
            let stem = format!("{t:05}");
            write_frame(&root, video, &stem, t);
            write_palette_annotation(&root, video, &stem, &ids_with(&[1, 4, 6]));
        }
    }
    let index = VosIndex::new(&VosLayout::new(&root), None).expect("scan");
    let dataset = VosDataset::new(index, clips(3, 2, 0.5), 21).expect("dataset");
    let epoch = |workers: usize, start: usize| -> Vec<VosClip> {
        let loader = VosLoader::new(dataset.clone(), workers, 1);
        let clips = loader.epoch_iter(4, start).collect::<Result<Vec<_>, _>>();
        clips.expect("clips")
    };
    let inline = epoch(0, 0);
    assert_eq!(inline.len(), 5);
    for (position, clip) in inline.iter().enumerate() {
        assert_eq!(*clip, dataset.train_clip(4, position).expect("clip"));
    }
    assert_eq!(epoch(1, 0), inline);
    assert_eq!(epoch(3, 0), inline);
    assert_eq!(epoch(8, 2), inline[2..]);
    // Dropping an iterator midway stops its workers without hanging.
    let loader = VosLoader::new(dataset.clone(), 3, 1);
    let mut early = loader.epoch_iter(0, 0);
    assert!(early.next().is_some_and(|clip| clip.is_ok()));
    assert_eq!(early.position(), 1);
    drop(early);

    // A broken frame ends the epoch with an error naming it, for any number of workers.
    for t in 0..5 {
        std::fs::write(root.join(format!("JPEGImages/gamma/{t:05}.png")), b"junk").expect("write");
    }
    for workers in [0, 2] {
        let loader = VosLoader::new(loader.dataset().clone(), workers, 2);
        let results: Vec<_> = loader.epoch_iter(0, 0).collect();
        let error = results.last().expect("results").as_ref().unwrap_err();
        assert!(error.to_string().contains("gamma"), "{error}");
        assert!(results[..results.len() - 1].iter().all(Result::is_ok));
    }
}

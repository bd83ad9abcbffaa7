//! An official checkpoint's size is recognised from its tensors (the four official key
//! listings), anything else is refused with the file named, and a given configuration (the
//! reduced fixture model) loads strictly instead.

mod sam2_hiera_support;

use burn::backend::{flex::FlexDevice, Flex};
use sam2_hiera_support::{listing, model_path, reduced_config};
use segburn_models::fixtures::{fixture_path, reference_dir};
use segburn_models::sam2::import::{self, is_video_memory_key};
use segburn_models::sam2::official_model::{
    detect_hiera_size, image_model_from_checkpoint, size_name, OfficialModelError, OFFICIAL_SIZES,
};
use segburn_models::sam2::{HieraSize, Sam2Config};

type B = Flex;

#[test]
fn every_official_listing_is_recognised_as_its_own_size() {
    let device = FlexDevice;
    for size in OFFICIAL_SIZES {
        let name = size_name(size);
        let shapes = listing(&reference_dir().join(format!("state_dict_sam2.1_hiera_{name}.txt")));
        let detected = detect_hiera_size::<B>(&|key| shapes.get(key).cloned(), &device);
        assert_eq!(detected, Ok(size), "{name}");
        // Without the video-memory tensors (an image-only export) it is the same model.
        let image_only: std::collections::BTreeMap<String, Vec<usize>> = shapes
            .into_iter()
            .filter(|(k, _)| !is_video_memory_key(k))
            .collect();
        let detected = detect_hiera_size::<B>(&|key| image_only.get(key).cloned(), &device);
        assert_eq!(detected, Ok(size), "{name} without video keys");
    }
}

#[test]
fn one_changed_shape_matches_no_size_and_the_closest_says_which_tensor() {
    let device = FlexDevice;
    let mut shapes = listing(&reference_dir().join("state_dict_sam2.1_hiera_b+.txt"));
    // b+ keeps the 14×14 background position embedding; a 7×7 one is no official model.
    shapes.insert("image_encoder.trunk.pos_embed".into(), vec![1, 112, 7, 7]);
    let fits = detect_hiera_size::<B>(&|key| shapes.get(key).cloned(), &device).unwrap_err();
    assert_eq!(fits.len(), 4);
    let b_plus = &fits[2];
    assert_eq!(b_plus.size, HieraSize::BasePlus);
    assert_eq!(b_plus.matched + 1, b_plus.expected);
    assert_eq!(
        b_plus.first_problem.as_deref(),
        Some("`image_encoder.trunk.pos_embed` is [1, 112, 7, 7], not [1, 112, 14, 14]")
    );
}

#[test]
fn a_file_of_no_official_size_is_refused_naming_it_unless_a_config_is_given() {
    let device = FlexDevice;
    // 13 tensors of the reduced model in the official `{"model": …}` container.
    let subset = fixture_path("sam2_hiera/model_subset_official_format.pt").unwrap();
    let tensors = import::read_checkpoint(&subset).expect("official .pt container");
    let name = subset.display().to_string();
    let error = image_model_from_checkpoint::<B>(&tensors, None, &name, &device).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, OfficialModelError::Unrecognised(_)),
        "{message}"
    );
    assert!(
        message.starts_with(&format!(
            "{name} is not an official SAM 2.1 image model: its tensors match none of the sizes"
        )),
        "{message}"
    );
    assert!(
        message.contains("(none of their tensors is in it with the official shape)"),
        "{message}"
    );

    // The whole reduced model: still no official size, but it loads with its configuration.
    let full = model_path();
    let tensors = import::read_checkpoint(&full).expect("model.safetensors");
    let name = full.display().to_string();
    let error = image_model_from_checkpoint::<B>(&tensors, None, &name, &device).unwrap_err();
    assert!(error.to_string().contains("closest: t, "), "{error}");
    let loaded = image_model_from_checkpoint::<B>(&tensors, Some(reduced_config()), &name, &device)
        .expect("the reduced configuration fits");
    assert_eq!(loaded.size, None);
    let video = tensors.keys().filter(|k| is_video_memory_key(k)).count();
    assert_eq!(loaded.report.not_used.len(), video);
    assert_eq!(loaded.report.loaded.len() + video, tensors.len());

    // A configuration the file does not fit fails the strict load, naming the file.
    let error = image_model_from_checkpoint::<B>(
        &tensors,
        Some(Sam2Config::sam2_1_hiera(HieraSize::Tiny)),
        &name,
        &device,
    )
    .unwrap_err();
    assert!(matches!(error, OfficialModelError::Model(_)), "{error}");
    assert!(error.to_string().contains(&name), "{error}");
    // And a configuration without a Hiera encoder cannot hold an official file.
    let error = image_model_from_checkpoint::<B>(
        &tensors,
        Some(reduced_config().with_image_encoder(None)),
        &name,
        &device,
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("needs image_encoder: Hiera"),
        "{error}"
    );
}

//! The whole model end to end with our image encoder: shapes, errors and config validation.

mod sam2_support;

use burn::backend::{flex::FlexDevice, Flex};
use burn::tensor::{Distribution, Tensor};
use sam2_support::labels;
use segburn_models::sam2::{PointPrompts, Prompts, Sam2Config, Sam2Error};

type B = Flex;

#[test]
fn images_to_masks_with_our_encoder() {
    let device = FlexDevice;
    let config = Sam2Config::sam2_1(64);
    config.check().expect("valid config");
    let model = config.init::<B>(&device);
    let images = Tensor::<B, 4>::random([2, 3, 64, 64], Distribution::Normal(0.0, 1.0), &device);
    let features = model.forward_image(images).expect("encoder");
    assert_eq!(features.image_embed.dims(), [2, 256, 4, 4]);
    let high_res = features.high_res.as_ref().expect("high-res features");
    assert_eq!(high_res.feat_s0.dims(), [2, 32, 16, 16]);
    assert_eq!(high_res.feat_s1.dims(), [2, 64, 8, 8]);

    let prompts = Prompts {
        points: Some(PointPrompts {
            coords: Tensor::from_floats([[[10.0, 12.0]], [[40.0, 50.0]]], &device),
            labels: labels(&[1, 1], [2, 1], &device),
        }),
        ..Prompts::default()
    };
    let output = model
        .forward_heads(&features, prompts.clone(), true)
        .expect("heads");
    assert_eq!(output.masks.dims(), [2, 3, 16, 16]);
    assert_eq!(output.iou_pred.dims(), [2, 3]);
    assert_eq!(output.sam_tokens_out.dims(), [2, 3, 256]);
    let iou: Vec<f32> = output.iou_pred.into_data().to_vec().expect("iou");
    assert!(
        iou.iter().all(|v| (0.0..=1.0).contains(v)),
        "sigmoid IoU: {iou:?}"
    );

    let single = model
        .forward_heads(&features, prompts, false)
        .expect("single");
    assert_eq!(single.masks.dims(), [2, 1, 16, 16]);
}

#[test]
fn decoder_only_models_and_bad_configs_are_errors() {
    let device = FlexDevice;
    let heads_only = Sam2Config::sam2_1(64)
        .with_image_encoder(None)
        .init::<B>(&device);
    let images = Tensor::<B, 4>::zeros([1, 3, 64, 64], &device);
    assert!(matches!(
        heads_only.forward_image(images),
        Err(Sam2Error::NoImageEncoder)
    ));

    let mut config = Sam2Config::sam2_1(64);
    config.prompt_encoder.input_image_size = [100, 64];
    let error = config.check().unwrap_err();
    assert!(
        error.to_string().contains("16 × image_embedding_size"),
        "{error}"
    );

    let mut config = Sam2Config::sam2_1(64);
    config.mask_decoder.transformer.num_heads = 7;
    assert!(config
        .check()
        .unwrap_err()
        .to_string()
        .contains("num_heads"));
}

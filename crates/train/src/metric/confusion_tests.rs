use super::*;
use burn::backend::{flex::FlexDevice, Flex};

/// 4 classes; class 2 is predicted but absent from the ground truth, class 3 is absent from
/// both, two pixels are ignored and one prediction is the ignore value.
fn small_case() -> ConfusionMatrix {
    let gt: [u8; 9] = [0, 0, 0, 1, 1, 255, 255, 0, 1];
    let pred: [u8; 9] = [0, 0, 1, 1, 2, 0, 1, 255, 1];
    let mut cm = ConfusionMatrix::new(4, 255);
    cm.update(&pred, &gt).unwrap();
    cm
}

#[test]
fn small_case_counts_by_hand() {
    let cm = small_case();
    #[rustfmt::skip]
    assert_eq!(cm.matrix(), vec![
        2, 1, 0, 0,
        0, 2, 1, 0,
        0, 0, 0, 0,
        0, 0, 0, 0,
    ]);
    assert_eq!(cm.invalid_predictions(0), 1);
    assert_eq!(cm.total_pixels(), 7);
    assert_eq!(
        (0..4)
            .map(|c| cm.ground_truth_pixels(c))
            .collect::<Vec<_>>(),
        vec![4, 3, 0, 0]
    );
    assert_eq!(
        (0..4).map(|c| cm.predicted_pixels(c)).collect::<Vec<_>>(),
        vec![2, 3, 1, 0]
    );
}

#[test]
fn small_case_metrics_by_hand() {
    let cm = small_case();
    // Class 0: TP 2, GT 4 (the ignore-valued prediction is a false negative), pred 2.
    assert_eq!(cm.iou(0), Some(0.5));
    // Class 1: TP 2, GT 3, pred 3.
    assert_eq!(cm.iou(1), Some(0.5));
    // Class 2: predicted once, never in GT: present with IoU 0.
    assert_eq!(cm.iou(2), Some(0.0));
    // Class 3: absent from both, excluded from mIoU.
    assert_eq!(cm.iou(3), None);
    assert!((cm.mean_iou() - 1.0 / 3.0).abs() < 1e-12);
    assert!((cm.mean_iou_all_classes() - 0.25).abs() < 1e-12);
    assert!((cm.pixel_accuracy() - 4.0 / 7.0).abs() < 1e-12);
    assert_eq!(cm.class_accuracy(2), None);
    assert!((cm.mean_class_accuracy() - (0.5 + 2.0 / 3.0) / 2.0).abs() < 1e-12);
}

fn pseudo_random_pixels(len: usize, classes: u64) -> (Vec<u8>, Vec<u8>) {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let gt = (0..len)
        .map(|_| match next() % 10 {
            0 => 255,
            _ => (next() % classes) as u8,
        })
        .collect();
    let pred = (0..len).map(|_| (next() % classes) as u8).collect();
    (pred, gt)
}

#[test]
fn merging_two_halves_equals_one_pass() {
    let (pred, gt) = pseudo_random_pixels(10_001, 19);
    let mut whole = ConfusionMatrix::new(19, 255);
    whole.update(&pred, &gt).unwrap();
    let mut first = ConfusionMatrix::new(19, 255);
    let mut second = ConfusionMatrix::new(19, 255);
    first.update(&pred[..4000], &gt[..4000]).unwrap();
    second.update(&pred[4000..], &gt[4000..]).unwrap();
    assert_ne!(first, whole);
    first.merge(&second).unwrap();
    assert_eq!(first, whole);
    assert_eq!(
        whole.total_pixels(),
        gt.iter().filter(|&&g| g != 255).count() as u64
    );
}

#[test]
fn label_types_and_tensor_paths_agree() {
    let (pred, gt) = pseudo_random_pixels(2 * 8 * 16, 5);
    let mut from_u8 = ConfusionMatrix::new(5, 255);
    from_u8.update(&pred, &gt).unwrap();

    let pred64: Vec<i64> = pred.iter().map(|&v| v.into()).collect();
    let gt64: Vec<i64> = gt.iter().map(|&v| v.into()).collect();
    let mut from_i64 = ConfusionMatrix::new(5, 255);
    from_i64.update(&pred64, &gt64).unwrap();
    assert_eq!(from_i64, from_u8);

    let device = FlexDevice;
    let labels =
        Tensor::<Flex, 3, Int>::from_data(TensorData::new(gt64.clone(), [2, 8, 16]), &device);
    let predictions =
        Tensor::<Flex, 3, Int>::from_data(TensorData::new(pred64.clone(), [2, 8, 16]), &device);
    let mut from_tensors = ConfusionMatrix::new(5, 255);
    from_tensors
        .update_from_predictions(predictions.clone(), labels.clone())
        .unwrap();
    assert_eq!(from_tensors, from_u8);

    // One-hot logits whose argmax is the prediction.
    let one_hot = predictions.one_hot::<4>(5).float().permute([0, 3, 1, 2]);
    let mut from_logits = ConfusionMatrix::new(5, 255);
    from_logits
        .update_from_logits(one_hot.clone(), labels)
        .unwrap();
    assert_eq!(from_logits, from_u8);
    let mut from_logits_host = ConfusionMatrix::new(5, 255);
    from_logits_host
        .update_from_logits_and_labels(one_hot, &gt)
        .unwrap();
    assert_eq!(from_logits_host, from_u8);
}

#[test]
fn bad_inputs_are_errors_and_leave_the_matrix_unchanged() {
    let mut cm = small_case();
    let before = cm.clone();
    let err = cm.update(&[0u8, 1, 2], &[0u8, 7, 1]).unwrap_err();
    assert!(
        matches!(err, MetricError::LabelOutOfRange { value: 7, .. }),
        "{err}"
    );
    let err = cm.update(&[0i64], &[-1i64]).unwrap_err();
    assert!(
        matches!(err, MetricError::LabelOutOfRange { value: -1, .. }),
        "{err}"
    );
    let err = cm.update(&[0u8, 1], &[0u8]).unwrap_err();
    assert!(matches!(err, MetricError::LengthMismatch { .. }), "{err}");
    assert_eq!(cm, before);
    let err = cm.merge(&ConfusionMatrix::new(3, 255)).unwrap_err();
    assert!(matches!(
        err,
        MetricError::ClassCountMismatch {
            expected: 4,
            got: 3
        }
    ));
}

#[test]
fn empty_matrix_gives_zeros_not_nan() {
    let cm = ConfusionMatrix::new(19, 255);
    assert_eq!(cm.mean_iou(), 0.0);
    assert_eq!(cm.mean_iou_all_classes(), 0.0);
    assert_eq!(cm.pixel_accuracy(), 0.0);
    assert_eq!(cm.mean_class_accuracy(), 0.0);
}

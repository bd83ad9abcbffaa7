//! Cityscapes trainId ↔ labelId: the evaluation server and `cityscapesscripts` read labelId
//! PNGs, so predictions are mapped back with the inverse of the official `convert_label`.

use crate::known_classes::{CITYSCAPES_CLASSES, CITYSCAPES_LABEL_ID_TO_TRAIN_ID};

/// The labelId of `unlabeled`, written for pixels without a trainId.
pub const UNLABELED: u8 = 0;

/// Whether `classes` are the 19 Cityscapes trainId classes (so labelIds make sense).
pub fn is_cityscapes(classes: &[String]) -> bool {
    classes.len() == CITYSCAPES_CLASSES.len()
        && classes.iter().zip(CITYSCAPES_CLASSES).all(|(a, b)| a == b)
}

/// The Cityscapes labelId of `train_id` (the official `save_pred` mapping); anything that is
/// not a trainId (e.g. the ignore value) becomes `unlabeled` (0).
pub fn train_id_to_label_id(train_id: u8) -> u8 {
    CITYSCAPES_LABEL_ID_TO_TRAIN_ID
        .iter()
        .find(|(_, t)| *t == train_id)
        .map_or(UNLABELED, |(label, _)| *label)
}

/// The trainId of a Cityscapes `label_id`, if it has one.
pub fn label_id_to_train_id(label_id: u8) -> Option<u8> {
    CITYSCAPES_LABEL_ID_TO_TRAIN_ID
        .iter()
        .find(|(l, _)| *l == label_id)
        .map(|(_, train)| *train)
}

/// Maps a whole trainId map to labelIds.
pub fn to_label_ids(train_ids: &[u8]) -> Vec<u8> {
    let mut table = [UNLABELED; 256];
    for (value, slot) in table.iter_mut().enumerate() {
        *slot = train_id_to_label_id(value as u8);
    }
    train_ids.iter().map(|&t| table[usize::from(t)]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn train_ids_round_trip_through_label_ids() {
        for train_id in 0..19u8 {
            let label_id = train_id_to_label_id(train_id);
            assert_eq!(label_id_to_train_id(label_id), Some(train_id));
        }
        // The official table, spot-checked: road 7, car 26, bicycle 33.
        assert_eq!(to_label_ids(&[0, 13, 18, 255, 19]), vec![7, 26, 33, 0, 0]);
        // Every labelId with a trainId maps back to itself.
        for label_id in 0..=255u8 {
            if let Some(train_id) = label_id_to_train_id(label_id) {
                assert_eq!(train_id_to_label_id(train_id), label_id);
            }
        }
        let classes: Vec<String> = CITYSCAPES_CLASSES.iter().map(|s| s.to_string()).collect();
        assert!(is_cityscapes(&classes));
        assert!(!is_cityscapes(&classes[..11]));
    }
}

//! The classes of the datasets segburn knows by name (Cityscapes, CamVid): names, palettes,
//! loss weights and label ids, as in the official PIDNet code so that results compare.
//!
//! Data, not logic: `labels` builds its mappings from these tables and re-exports them (the
//! public path), `label_ids` maps predictions back to Cityscapes labelIds with them.

/// The 19 Cityscapes training classes, in trainId order.
pub const CITYSCAPES_CLASSES: [&str; 19] = [
    "road",
    "sidewalk",
    "building",
    "wall",
    "fence",
    "pole",
    "traffic light",
    "traffic sign",
    "vegetation",
    "terrain",
    "sky",
    "person",
    "rider",
    "car",
    "truck",
    "bus",
    "train",
    "motorcycle",
    "bicycle",
];

/// The official Cityscapes colours of the 19 trainIds.
pub const CITYSCAPES_PALETTE: [[u8; 3]; 19] = [
    [128, 64, 128],
    [244, 35, 232],
    [70, 70, 70],
    [102, 102, 156],
    [190, 153, 153],
    [153, 153, 153],
    [250, 170, 30],
    [220, 220, 0],
    [107, 142, 35],
    [152, 251, 152],
    [70, 130, 180],
    [220, 20, 60],
    [255, 0, 0],
    [0, 0, 142],
    [0, 0, 70],
    [0, 60, 100],
    [0, 80, 100],
    [0, 0, 230],
    [119, 11, 32],
];

/// The class weights of the official Cityscapes loss (`datasets/cityscapes.py`), trainId order.
pub const CITYSCAPES_CLASS_WEIGHTS: [f32; 19] = [
    0.8373, 0.918, 0.866, 1.0345, 1.0166, 0.9969, 0.9754, 1.0489, 0.8786, 1.0023, 0.9539, 0.9843,
    1.1116, 0.9037, 1.0865, 1.0955, 1.0865, 1.1529, 1.0507,
];

/// `(labelId, trainId)` pairs of the official `convert_label`; every other id has no trainId.
pub const CITYSCAPES_LABEL_ID_TO_TRAIN_ID: [(u8, u8); 19] = [
    (7, 0),
    (8, 1),
    (11, 2),
    (12, 3),
    (13, 4),
    (17, 5),
    (19, 6),
    (20, 7),
    (21, 8),
    (22, 9),
    (23, 10),
    (24, 11),
    (25, 12),
    (26, 13),
    (27, 14),
    (28, 15),
    (31, 16),
    (32, 17),
    (33, 18),
];

/// The 11 CamVid classes, in the index order of the official loader.
pub const CAMVID_CLASSES: [&str; 11] = [
    "bicyclist",
    "building",
    "car",
    "column/pole",
    "fence",
    "pedestrian",
    "road",
    "sidewalk",
    "sign/symbol",
    "sky",
    "tree",
];

/// The CamVid label colours, in class order (the official `color_list`).
pub const CAMVID_PALETTE: [[u8; 3]; 11] = [
    [0, 128, 192],
    [128, 0, 0],
    [64, 0, 128],
    [192, 192, 128],
    [64, 64, 128],
    [64, 64, 0],
    [128, 64, 128],
    [0, 0, 192],
    [192, 128, 128],
    [128, 128, 128],
    [128, 128, 0],
];

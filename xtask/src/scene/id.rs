//! Cityscapes labelIds of the classes drawn (see `CITYSCAPES_LABEL_ID_TO_TRAIN_ID`).

pub const EGO_VEHICLE: u8 = 1;
pub const ROAD: u8 = 7;
pub const SIDEWALK: u8 = 8;
pub const BUILDING: u8 = 11;
pub const POLE: u8 = 17;
pub const TRAFFIC_SIGN: u8 = 20;
pub const VEGETATION: u8 = 21;
pub const SKY: u8 = 23;
pub const PERSON: u8 = 24;
pub const CAR: u8 = 26;

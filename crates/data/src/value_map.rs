//! How the raw values of index-encoded label files (folder pair, list file `Indices`, ADE20K,
//! Pascal VOC) become training ids: as they are, shifted down by one (`reduce_zero_label`), by
//! a brightness threshold (`Binary`), or by an explicit table (`Map`).
//!
//! Every mapping is a 256-entry table from raw value to training id; values the mapping does
//! not cover are errors (reported with their pixel counts), never silently ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::DataError;

/// Raw value -> training id, or [`INVALID`].
pub(crate) type ValueTable = [u16; 256];

/// Marks a raw value that maps to nothing.
pub(crate) const INVALID: u16 = u16::MAX;

/// How the values stored in index label files map to classes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ValueMap {
    /// Value `v` is class `v` for `v < classes.len()`; the ignore index is ignored; any other
    /// value is an error.
    #[default]
    Identity,
    /// Two classes: a pixel whose value is at least `threshold` is class 1, any other class 0.
    /// For 0/255 masks and anti-aliased ones (`threshold: 128`). 1-, 2- and 4-bit grey PNGs are
    /// compared at their 8-bit brightness (a 1-bit mask's 1 is 255); palette PNGs by index.
    Binary { threshold: u8 },
    /// Explicit: each listed raw value becomes a class or is ignored; every value not listed
    /// is an error. `Map({0: Class(0), 255: Class(1), 128: Ignore})`.
    Map(BTreeMap<u8, ValueTarget>),
}

/// What a raw value of [`ValueMap::Map`] becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValueTarget {
    /// This training id.
    Class(u8),
    /// The ignore index (`data.ignore_index`).
    Ignore,
}

impl ValueMap {
    /// The table for `num_classes` classes, with `reduce_zero_label` (mmsegmentation's: raw 0
    /// and 255 are ignored, raw `v` in `1..=num_classes` is class `v - 1`), and a description
    /// of what it accepts for error messages. Fails, naming the field, when the mapping cannot
    /// work for these classes.
    pub(crate) fn table(
        &self,
        num_classes: usize,
        reduce_zero_label: bool,
        ignore_index: u8,
    ) -> Result<(ValueTable, String), DataError> {
        let ignore = u16::from(ignore_index);
        let mut table = [INVALID; 256];
        if reduce_zero_label && *self != ValueMap::Identity {
            return Err(DataError::config(
                "reduce_zero_label",
                "works with the identity mapping only; with `values` write the shift into a \
                 `Map` instead",
            ));
        }
        let description = match self {
            ValueMap::Identity if reduce_zero_label => {
                for (value, slot) in table.iter_mut().enumerate().skip(1).take(num_classes) {
                    *slot = (value - 1) as u16;
                }
                table[0] = ignore;
                table[255] = ignore;
                format!("indices 1..={num_classes} shifted down by one (reduce_zero_label: 0 and 255 are ignored)")
            }
            ValueMap::Identity => {
                for (value, slot) in table.iter_mut().enumerate().take(num_classes) {
                    *slot = value as u16;
                }
                table[usize::from(ignore_index)] = ignore;
                format!("indices 0..={}", num_classes - 1)
            }
            ValueMap::Binary { threshold } => {
                if num_classes != 2 {
                    return Err(DataError::config(
                        "values",
                        format!("Binary maps to 2 classes but {num_classes} are named"),
                    ));
                }
                if *threshold == 0 {
                    return Err(DataError::config(
                        "values",
                        "Binary(threshold: 0) makes every pixel class 1; use 1..=255 (128 for \
                         0/255 masks)",
                    ));
                }
                for (value, slot) in table.iter_mut().enumerate() {
                    *slot = u16::from(value >= usize::from(*threshold));
                }
                format!("binary masks: values >= {threshold} are class 1, the rest class 0")
            }
            ValueMap::Map(entries) => {
                if entries.is_empty() {
                    return Err(DataError::config(
                        "values",
                        "Map is empty; list every value the label files hold",
                    ));
                }
                for (&value, &target) in entries {
                    table[usize::from(value)] = match target {
                        ValueTarget::Ignore => ignore,
                        ValueTarget::Class(class) if usize::from(class) < num_classes => {
                            u16::from(class)
                        }
                        ValueTarget::Class(class) => {
                            return Err(DataError::config(
                                "values",
                                format!(
                                    "value {value} maps to class {class}, but there are only \
                                     {num_classes} classes (0..={})",
                                    num_classes - 1
                                ),
                            ))
                        }
                    };
                }
                let listed: Vec<String> = entries.keys().map(u8::to_string).collect();
                format!("the values of the map ({})", listed.join(", "))
            }
        };
        Ok((table, description))
    }

    /// Whether raw values are brightness levels (so low-bit-depth grey values are first
    /// scaled to 8 bits) rather than indices.
    pub(crate) fn compares_brightness(&self) -> bool {
        matches!(self, ValueMap::Binary { .. })
    }
}

/// A `bits`-deep grey value at 8-bit brightness (1-bit 1 -> 255, 4-bit 15 -> 255).
pub(crate) fn eight_bit_brightness(value: u8, bits: u8) -> u8 {
    if bits >= 8 {
        return value;
    }
    let full = (1u16 << bits) - 1;
    (u16::from(value) * 255 / full) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(map: &ValueMap, classes: usize, reduce: bool, raw: &[u8]) -> Vec<u16> {
        let (table, _) = map.table(classes, reduce, 255).expect("valid mapping");
        raw.iter().map(|&v| table[usize::from(v)]).collect()
    }

    #[test]
    fn binary_thresholds_and_accepts_every_value() {
        let binary = ValueMap::Binary { threshold: 128 };
        assert_eq!(
            mapped(&binary, 2, false, &[0, 1, 127, 128, 254, 255]),
            [0, 0, 0, 1, 1, 1]
        );
        assert!(
            binary.table(3, false, 255).is_err(),
            "binary needs 2 classes"
        );
        assert!(ValueMap::Binary { threshold: 0 }
            .table(2, false, 255)
            .is_err());
        assert_eq!(eight_bit_brightness(1, 1), 255);
        assert_eq!(eight_bit_brightness(7, 4), 119);
        assert_eq!(eight_bit_brightness(200, 8), 200);
    }

    #[test]
    fn an_explicit_map_names_every_value_and_rejects_the_rest() {
        let map: ValueMap =
            ron::from_str("Map({0: Class(0), 255: Class(1), 128: Ignore})").expect("valid RON");
        assert_eq!(
            mapped(&map, 2, false, &[0, 128, 255, 7]),
            [0, 255, 1, INVALID]
        );
        let error = ValueMap::Map([(9, ValueTarget::Class(2))].into())
            .table(2, false, 255)
            .expect_err("class 2 of 2")
            .to_string();
        assert!(error.contains("value 9 maps to class 2"), "{error}");
    }

    #[test]
    fn reduce_zero_label_shifts_classes_down_and_ignores_zero_and_255() {
        let identity = ValueMap::Identity;
        assert_eq!(
            mapped(&identity, 150, true, &[0, 1, 2, 150, 151, 255]),
            [255, 0, 1, 149, INVALID, 255]
        );
        assert_eq!(
            mapped(&identity, 3, false, &[0, 2, 3, 255]),
            [0, 2, INVALID, 255]
        );
        let error = ValueMap::Binary { threshold: 1 }
            .table(2, true, 255)
            .expect_err("reduce with binary")
            .to_string();
        assert!(error.contains("reduce_zero_label"), "{error}");
    }
}

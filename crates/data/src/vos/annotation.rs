//! Reading a VOS annotation: one PNG per annotated frame whose pixel values are object ids
//! (DAVIS, MOSE and SA-V store palette PNGs; the palette is only for viewing, the *index* is
//! the id). 0 is background and 255 is void (DAVIS marks uncertain pixels with it); neither is
//! an object.

use std::path::Path;

use super::error::VosError;
use crate::decode::{decode_png, read_file, unpack, PNG_SIGNATURE};

/// The background id: no object.
pub const BACKGROUND: u8 = 0;
/// The void id: no object, and no background either (DAVIS' uncertain borders).
pub const VOID: u8 = 255;

/// A decoded annotation: one object id per pixel, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub width: usize,
    pub height: usize,
    pub ids: Vec<u8>,
}

impl Annotation {
    /// The object ids present (neither background nor void), ascending.
    pub fn object_ids(&self) -> Vec<u32> {
        let mut seen = [false; 256];
        for &id in &self.ids {
            seen[usize::from(id)] = true;
        }
        (1..255u32).filter(|&id| seen[id as usize]).collect()
    }
}

/// Reads an annotation PNG: 8-bit palette or grey (palettes of 1, 2 or 4 bits, which hold
/// indices too, are unpacked). Anything else (16-bit, RGB, grey with alpha, JPEG) is refused
/// with what was found, since its values would not be object ids.
pub fn read_annotation(path: &Path) -> Result<Annotation, VosError> {
    let bytes = read_file(path)?;
    if !bytes.starts_with(PNG_SIGNATURE) {
        return Err(VosError::AnnotationFormat {
            path: path.to_path_buf(),
            found: "not a PNG file (JPEG compression would change the ids)".to_string(),
        });
    }
    let raw = decode_png(path, &bytes, png::Transformations::IDENTITY)?;
    let bits = raw.bit_depth as u8;
    let accepted = match raw.color_type {
        png::ColorType::Indexed => bits <= 8,
        png::ColorType::Grayscale => bits == 8,
        _ => false,
    };
    if !accepted {
        return Err(VosError::AnnotationFormat {
            path: path.to_path_buf(),
            found: format!("a {bits}-bit {:?} PNG", raw.color_type),
        });
    }
    let ids = unpack(&raw.pixels, raw.width, raw.height, bits);
    Ok(Annotation {
        width: raw.width,
        height: raw.height,
        ids,
    })
}

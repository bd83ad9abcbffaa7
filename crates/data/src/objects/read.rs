//! Reading instance maps and per-object mask PNGs as integer id maps.
//!
//! Unlike class labels, instance maps are often 16-bit (Cityscapes' `instanceIds`) or colour
//! coded, so every PNG flavour becomes one `u32` per pixel: grey and palette values as they
//! are (palette *indices*, as VOC's `SegmentationObject`), RGB as `r << 16 | g << 8 | b`.

use std::io::Cursor;
use std::path::Path;

use crate::error::DataError;

/// A decoded id map, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdMap {
    pub width: usize,
    pub height: usize,
    pub ids: Vec<u32>,
}

fn decode_error(path: &Path, message: impl std::fmt::Display) -> DataError {
    DataError::Decode {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// Reads a PNG as one id per pixel. JPEG is refused: its compression invents values.
pub fn read_id_map(path: &Path) -> Result<IdMap, DataError> {
    let bytes = std::fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(DataError::UnsupportedFormat {
            path: path.to_path_buf(),
            detail: "object masks must be PNG (JPEG compression changes values)".to_string(),
        });
    }
    let mut decoder = png::Decoder::new(Cursor::new(&bytes));
    decoder.set_transformations(png::Transformations::IDENTITY);
    decoder.set_ignore_text_chunk(true);
    let mut reader = decoder.read_info().map_err(|e| decode_error(path, e))?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| decode_error(path, "image too large"))?;
    let mut buffer = vec![0u8; size];
    let info = reader
        .next_frame(&mut buffer)
        .map_err(|e| decode_error(path, e))?;
    buffer.truncate(info.buffer_size());
    let (width, height) = (info.width as usize, info.height as usize);
    let bits = info.bit_depth as usize;
    let channels = info.color_type.samples();
    let line = info.line_size;
    let sample = |row: &[u8], index: usize| -> u32 {
        match bits {
            16 => u32::from(u16::from_be_bytes([row[2 * index], row[2 * index + 1]])),
            8 => u32::from(row[index]),
            // Sub-byte depths pack pixels from the most significant bit.
            _ => {
                let per_byte = 8 / bits;
                let byte = row[index / per_byte];
                let shift = 8 - bits * (index % per_byte + 1);
                u32::from((byte >> shift) & ((1u8 << bits) - 1))
            }
        }
    };
    let mut ids = Vec::with_capacity(width * height);
    for y in 0..height {
        let row = &buffer[y * line..(y + 1) * line];
        for x in 0..width {
            let base = x * channels;
            let id = match info.color_type {
                png::ColorType::Grayscale
                | png::ColorType::Indexed
                | png::ColorType::GrayscaleAlpha => sample(row, base),
                png::ColorType::Rgb | png::ColorType::Rgba => {
                    // 16-bit colour keeps the high byte of each channel.
                    let channel = |c: usize| {
                        let v = sample(row, base + c);
                        if bits == 16 {
                            v >> 8
                        } else {
                            v
                        }
                    };
                    (channel(0) << 16) | (channel(1) << 8) | channel(2)
                }
            };
            ids.push(id);
        }
    }
    Ok(IdMap { width, height, ids })
}

//! Decoding image and label files into plain pixel buffers.
//!
//! Formats are recognised by their signature, not their extension. PNG goes through the `png`
//! crate directly (so palette labels keep their indices and nothing is converted twice); JPEG
//! through libjpeg-turbo (`jpeg.rs`), bit-identical to OpenCV and Pillow, turned upright by its
//! EXIF orientation unless asked not to. Labels must be PNG: JPEG's lossy compression invents
//! class values.

use std::io::Cursor;
use std::path::Path;

use crate::error::DataError;
use crate::jpeg::decode_jpeg;
use crate::labels::LabelMap;
use crate::orientation::apply_orientation;
pub use crate::pixels::{LabelImage, RgbImage};

pub(crate) const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
const JPEG_SIGNATURE: &[u8] = b"\xff\xd8\xff";

/// Above the `png` crate's 64 MiB default, so 8K x 8K RGBA photos still decode.
const PNG_MEMORY_LIMIT: usize = 1 << 30;

pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, DataError> {
    std::fs::read(path).map_err(|e| DataError::io(path, e))
}

fn decode_error(path: &Path, message: impl std::fmt::Display) -> DataError {
    DataError::Decode {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn unknown_format(path: &Path, bytes: &[u8]) -> DataError {
    let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    decode_error(
        path,
        format!(
            "not a PNG or JPEG file ({} bytes, starting with [{}])",
            bytes.len(),
            head.join(" ")
        ),
    )
}

/// Whether a JPEG's EXIF orientation is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orientation {
    /// Turn the photo upright, as `cv2.imread` does (the official PIDNet loader).
    FromExif,
    /// Keep the pixels as stored, as Pillow's `Image.open` does (the official SAM 2 loader).
    AsStored,
}

/// Reads a PNG or JPEG image as 8-bit RGB, upright by its EXIF orientation (as `cv2.imread`).
pub fn read_image(path: &Path) -> Result<RgbImage, DataError> {
    read_image_with(path, Orientation::FromExif)
}

/// Reads a PNG or JPEG image as 8-bit RGB. Grey, grey+alpha and RGBA are converted (alpha is
/// dropped, as OpenCV's `imread` does); 16-bit PNGs keep their high byte. A JPEG's EXIF
/// orientation is applied or not as `orientation` says (PNGs are always read as stored).
pub fn read_image_with(path: &Path, orientation: Orientation) -> Result<RgbImage, DataError> {
    let bytes = read_file(path)?;
    if bytes.starts_with(PNG_SIGNATURE) {
        let raw = decode_png(path, &bytes, png::Transformations::normalize_to_color8())?;
        let pixels = match raw.channels {
            3 => raw.pixels,
            channels => to_rgb(&raw.pixels, channels),
        };
        Ok(RgbImage {
            width: raw.width,
            height: raw.height,
            pixels,
        })
    } else if bytes.starts_with(JPEG_SIGNATURE) {
        let jpeg = decode_jpeg(&bytes).map_err(|message| decode_error(path, message))?;
        let image = RgbImage {
            width: jpeg.width,
            height: jpeg.height,
            pixels: jpeg.rgb,
        };
        Ok(match (orientation, jpeg.orientation) {
            (Orientation::FromExif, Some(tag)) => apply_orientation(image, tag),
            _ => image,
        })
    } else {
        Err(unknown_format(path, &bytes))
    }
}

/// Reads a label PNG and maps it to training ids with `labels`, failing on values that are
/// neither a class nor the ignore index.
///
/// Accepted: 8-bit (or 1/2/4-bit) grey and palette PNGs, whose values (palette indices, not
/// colours) are the raw labels; and RGB(A) PNGs for colour encodings such as CamVid's. An RGB
/// file whose three channels are equal everywhere is read as grey.
pub fn read_label(path: &Path, labels: &LabelMap) -> Result<LabelImage, DataError> {
    let bytes = read_file(path)?;
    if bytes.starts_with(JPEG_SIGNATURE) {
        return Err(DataError::UnsupportedFormat {
            path: path.to_path_buf(),
            detail: "labels must be PNG: JPEG compression changes class values".to_string(),
        });
    }
    if !bytes.starts_with(PNG_SIGNATURE) {
        return Err(unknown_format(path, &bytes));
    }
    let raw = decode_png(path, &bytes, png::Transformations::IDENTITY)?;
    if raw.bit_depth == png::BitDepth::Sixteen {
        return Err(DataError::UnsupportedFormat {
            path: path.to_path_buf(),
            detail: "16-bit label; labels must be 8-bit (instance-id images are 16-bit: point \
                     the dataset at the *_labelIds.png files)"
                .to_string(),
        });
    }
    let bits = raw.bit_depth as u8;
    let (width, height) = (raw.width, raw.height);
    let bad = |bad| DataError::BadLabelValues {
        path: path.to_path_buf(),
        encoding: labels.description().to_string(),
        ignore_index: labels.ignore_index(),
        bad,
    };
    let mapped = match raw.color_type {
        png::ColorType::Grayscale | png::ColorType::Indexed if labels.wants_colour() => {
            match (raw.color_type, &raw.palette) {
                (png::ColorType::Indexed, Some(palette)) => {
                    let indices = unpack(&raw.pixels, width, height, bits);
                    labels.map_rgb(&palette_to_rgb(&indices, palette))
                }
                _ => {
                    return Err(DataError::UnsupportedFormat {
                        path: path.to_path_buf(),
                        detail: format!(
                            "single-channel label, but {} are colours",
                            labels.description()
                        ),
                    })
                }
            }
        }
        png::ColorType::Grayscale => {
            labels.map_grey_levels(&unpack(&raw.pixels, width, height, bits), bits)
        }
        png::ColorType::Indexed => labels.map_grey(&unpack(&raw.pixels, width, height, bits)),
        png::ColorType::GrayscaleAlpha => labels.map_grey(&first_channel(&raw.pixels, 2)),
        png::ColorType::Rgb | png::ColorType::Rgba => {
            let channels = raw.channels;
            let rgb = if channels == 4 {
                to_rgb(&raw.pixels, 4)
            } else {
                raw.pixels
            };
            if labels.wants_colour() {
                labels.map_rgb(&rgb)
            } else if rgb.chunks_exact(3).all(|p| p[0] == p[1] && p[1] == p[2]) {
                labels.map_grey(&first_channel(&rgb, 3))
            } else {
                return Err(DataError::UnsupportedFormat {
                    path: path.to_path_buf(),
                    detail: format!(
                        "colour label, but {} are single-channel values (is this a colour \
                         visualisation rather than the label file?)",
                        labels.description()
                    ),
                });
            }
        }
    }
    .map_err(bad)?;
    Ok(LabelImage {
        width,
        height,
        pixels: mapped,
    })
}

/// What the PNG decoder produced.
pub(crate) struct RawPng {
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) channels: usize,
    pub(crate) color_type: png::ColorType,
    pub(crate) bit_depth: png::BitDepth,
    pub(crate) palette: Option<Vec<u8>>,
    pub(crate) pixels: Vec<u8>,
}

pub(crate) fn decode_png(
    path: &Path,
    bytes: &[u8],
    transformations: png::Transformations,
) -> Result<RawPng, DataError> {
    let limits = png::Limits {
        bytes: PNG_MEMORY_LIMIT,
    };
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(bytes), limits);
    decoder.set_transformations(transformations);
    // Text and colour-profile chunks carry nothing a loader needs.
    decoder.set_ignore_text_chunk(true);
    decoder.set_ignore_iccp_chunk(true);
    let mut reader = decoder.read_info().map_err(|e| decode_error(path, e))?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| decode_error(path, "image too large for memory"))?;
    let palette = reader.info().palette.as_ref().map(|p| p.to_vec());
    let mut pixels = vec![0u8; size];
    let frame = reader
        .next_frame(&mut pixels)
        .map_err(|e| decode_error(path, e))?;
    let width = frame.width as usize;
    let height = frame.height as usize;
    let channels = frame.color_type.samples();
    // Rows are packed for 8-bit output; sub-byte depths keep their row padding for `unpack`.
    pixels.truncate(frame.line_size * height);
    Ok(RawPng {
        width,
        height,
        channels,
        color_type: frame.color_type,
        bit_depth: frame.bit_depth,
        palette,
        pixels,
    })
}

/// Unpacks 1/2/4-bit rows (each row padded to a whole byte) to one byte per pixel.
pub(crate) fn unpack(packed: &[u8], width: usize, height: usize, bits: u8) -> Vec<u8> {
    if bits == 8 {
        return packed.to_vec();
    }
    let bits = usize::from(bits);
    let row_bytes = (width * bits).div_ceil(8);
    let per_byte = 8 / bits;
    let mask = (1u8 << bits) - 1;
    let mut out = Vec::with_capacity(width * height);
    for row in packed.chunks_exact(row_bytes).take(height) {
        for x in 0..width {
            let byte = row[x / per_byte];
            let shift = 8 - bits * (x % per_byte + 1);
            out.push((byte >> shift) & mask);
        }
    }
    out
}

fn palette_to_rgb(indices: &[u8], palette: &[u8]) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(indices.len() * 3);
    for &index in indices {
        let at = usize::from(index) * 3;
        // An index past the palette is invalid PNG; show it as black rather than panic.
        rgb.extend_from_slice(palette.get(at..at + 3).unwrap_or(&[0, 0, 0]));
    }
    rgb
}

fn first_channel(pixels: &[u8], channels: usize) -> Vec<u8> {
    pixels.iter().step_by(channels).copied().collect()
}

/// Grey (1), grey+alpha (2) or RGBA (4) to RGB.
fn to_rgb(pixels: &[u8], channels: usize) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(pixels.len() / channels * 3);
    for px in pixels.chunks_exact(channels) {
        match channels {
            1 | 2 => rgb.extend_from_slice(&[px[0], px[0], px[0]]),
            _ => rgb.extend_from_slice(&px[..3]),
        }
    }
    rgb
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;

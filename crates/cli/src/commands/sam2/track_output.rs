//! What `track-sam2` writes per frame: the objects as one DAVIS-style palette PNG (pixel value
//! = object id, 0 background; where objects overlap, the highest logit wins) and an overlay of
//! the frame with each object in its palette colour.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use anyhow::Context;

use segburn_data::pascal_voc_palette;

use crate::output::pictures::blend;

/// Object ids per pixel from their logits `[objects][pixels]`: the id of the highest positive
/// logit, 0 where none is positive.
pub fn object_ids(logits: &[Vec<f32>], ids: &[u32]) -> Vec<u8> {
    let pixels = logits.first().map_or(0, Vec::len);
    (0..pixels)
        .map(|p| {
            let mut best = (0u8, 0.0f32);
            for (values, &id) in logits.iter().zip(ids) {
                if values[p] > best.1 {
                    best = (id as u8, values[p]);
                }
            }
            best.0
        })
        .collect()
}

/// Writes `ids` (`height × width`) as an 8-bit palette PNG with the DAVIS palette.
pub fn write_palette_png(
    path: &Path,
    ids: &[u8],
    [height, width]: [usize; 2],
) -> anyhow::Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), width as u32, height as u32);
    encoder.set_color(png::ColorType::Indexed);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_palette(pascal_voc_palette(256).concat());
    let mut writer = encoder
        .write_header()
        .with_context(|| format!("cannot write {}", path.display()))?;
    writer
        .write_image_data(ids)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writer
        .finish()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The frame with every object tinted in its colour (half opacity), as an RGB PNG.
pub fn write_overlay(
    path: &Path,
    rgb: &[u8],
    ids: &[u8],
    [height, width]: [usize; 2],
) -> anyhow::Result<()> {
    let palette = pascal_voc_palette(256);
    let colour: Vec<u8> = ids
        .iter()
        .flat_map(|&id| palette[usize::from(id)])
        .collect();
    let tinted = blend(rgb, &colour, 0.5);
    let overlay: Vec<u8> = tinted
        .chunks_exact(3)
        .zip(rgb.chunks_exact(3))
        .zip(ids)
        .flat_map(|((tinted, original), &id)| {
            if id > 0 {
                [tinted[0], tinted[1], tinted[2]]
            } else {
                [original[0], original[1], original[2]]
            }
        })
        .collect();
    image::save_buffer(
        path,
        &overlay,
        width as u32,
        height as u32,
        image::ExtendedColorType::Rgb8,
    )
    .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_palette_is_davis_and_overlaps_go_to_the_higher_logit() {
        let palette = pascal_voc_palette(256);
        assert_eq!(palette[0], [0, 0, 0]);
        assert_eq!(palette[1], [128, 0, 0]);
        assert_eq!(palette[2], [0, 128, 0]);
        assert_eq!(palette[3], [128, 128, 0]);
        assert_eq!(palette[4], [0, 0, 128]);
        assert_eq!(palette[255], [224, 224, 192]);
        let logits = vec![vec![1.0, -1.0, 3.0, -2.0], vec![2.0, -0.5, 1.0, 0.0]];
        assert_eq!(object_ids(&logits, &[4, 9]), [9, 0, 4, 0]);
    }
}

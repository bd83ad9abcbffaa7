//! Writing PNG files (the only format xtask produces).

use std::path::Path;

use anyhow::Context;

/// Writes 8-bit grey (`channels = 1`) or RGB (`channels = 3`) pixels as a PNG.
pub fn write(
    path: &Path,
    width: usize,
    height: usize,
    channels: usize,
    pixels: &[u8],
) -> anyhow::Result<()> {
    let colour = if channels == 1 {
        png::ColorType::Grayscale
    } else {
        png::ColorType::Rgb
    };
    write_with(path, width, height, colour, None, pixels)
}

/// Writes 8-bit palette indices as a palette PNG (`palette`: RGB triples), the way DAVIS,
/// MOSE and SA-V store their annotations.
pub fn write_indexed(
    path: &Path,
    width: usize,
    height: usize,
    palette: &[u8],
    indices: &[u8],
) -> anyhow::Result<()> {
    write_with(
        path,
        width,
        height,
        png::ColorType::Indexed,
        Some(palette),
        indices,
    )
}

fn write_with(
    path: &Path,
    width: usize,
    height: usize,
    colour: png::ColorType,
    palette: Option<&[u8]>,
    pixels: &[u8],
) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width as u32, height as u32);
    encoder.set_color(colour);
    if let Some(palette) = palette {
        encoder.set_palette(palette.to_vec());
    }
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::High);
    let mut writer = encoder
        .write_header()
        .with_context(|| format!("cannot write {}", path.display()))?;
    writer
        .write_image_data(pixels)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writer
        .finish()
        .with_context(|| format!("cannot finish {}", path.display()))?;
    Ok(())
}

//! Fixture helpers shared by the unit tests: tiny datasets written to temporary folders.

use std::path::{Path, PathBuf};

/// Writes an 8-bit PNG of `channels` (1 grey, 3 RGB, 4 RGBA) samples per pixel.
pub fn write_png(path: &Path, width: usize, height: usize, channels: usize, pixels: &[u8]) {
    assert_eq!(pixels.len(), width * height * channels, "fixture size");
    let colour = match channels {
        1 => png::ColorType::Grayscale,
        2 => png::ColorType::GrayscaleAlpha,
        3 => png::ColorType::Rgb,
        4 => png::ColorType::Rgba,
        _ => panic!("unsupported fixture channel count {channels}"),
    };
    write_png_with(
        path,
        width,
        height,
        colour,
        png::BitDepth::Eight,
        None,
        pixels,
    );
}

/// Writes a PNG with an explicit colour type, depth and palette (packed rows for sub-byte).
pub fn write_png_with(
    path: &Path,
    width: usize,
    height: usize,
    colour: png::ColorType,
    depth: png::BitDepth,
    palette: Option<Vec<u8>>,
    data: &[u8],
) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create fixture folder");
    }
    let file = std::fs::File::create(path).expect("create fixture file");
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width as u32, height as u32);
    encoder.set_color(colour);
    encoder.set_depth(depth);
    if let Some(palette) = palette {
        encoder.set_palette(palette);
    }
    let mut writer = encoder.write_header().expect("png header");
    writer.write_image_data(data).expect("png data");
}

/// A label map of vertical stripes of `values` (each `stripe` px wide), and an image whose
/// pixels are the colour `colour_of(value)` of their label: what a pixel shows says which
/// class it has, so alignment survives any augmentation test.
pub fn striped(
    width: usize,
    height: usize,
    stripe: usize,
    values: &[u8],
    colour_of: impl Fn(u8) -> [u8; 3],
) -> (Vec<u8>, Vec<u8>) {
    let mut label = Vec::with_capacity(width * height);
    let mut image = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for x in 0..width {
            // Stripes shifted per band of rows give horizontal boundaries too.
            let value = values[(x / stripe + y / stripe) % values.len()];
            label.push(value);
            image.extend_from_slice(&colour_of(value));
        }
    }
    (image, label)
}

/// The colour the fixtures paint training id (or raw value) `v` with.
pub fn fixture_colour(v: u8) -> [u8; 3] {
    [
        v.wrapping_mul(37),
        v.wrapping_mul(91).wrapping_add(17),
        255 - v,
    ]
}

/// Writes a Cityscapes-layout dataset under `root`: `count` samples in `city` of `split`, with
/// labelIds stripes (road 7, sidewalk 8, building 11, void 0, car 26). Returns the image paths.
pub fn cityscapes(
    root: &Path,
    split: &str,
    city: &str,
    count: usize,
    w: usize,
    h: usize,
) -> Vec<PathBuf> {
    (0..count)
        .map(|i| {
            let stem = format!("{city}_{i:06}_000019");
            let image = root
                .join("leftImg8bit")
                .join(split)
                .join(city)
                .join(format!("{stem}_leftImg8bit.png"));
            let label = root
                .join("gtFine")
                .join(split)
                .join(city)
                .join(format!("{stem}_gtFine_labelIds.png"));
            let ids = [7u8, 8, 11, 0, 26];
            let rotated: Vec<u8> = (0..ids.len()).map(|k| ids[(k + i) % ids.len()]).collect();
            let (pixels, labels) = striped(w, h, 3 + i % 4, &rotated, fixture_colour);
            write_png(&image, w, h, 3, &pixels);
            write_png(&label, w, h, 1, &labels);
            image
        })
        .collect()
}

/// A small data config for tests: tiny crop, base size and scales, explicit workers.
pub fn small_config(layout: crate::Layout) -> crate::DataConfig {
    let mut config = crate::DataConfig {
        layout,
        ..crate::DataConfig::default()
    };
    config.augment.base_size = 40;
    config.augment.crop_height = 16;
    config.augment.crop_width = 24;
    config.train_loader.batch_size = 3;
    config.train_loader.num_workers = 2;
    config.val_loader.num_workers = 2;
    config
}

/// The generator that writes a fixture of `tests/fixtures/pipeline/`.
fn generator_of(relative: &str) -> &'static str {
    if relative.ends_with("grads.safetensors") {
        "pidnet.py"
    } else {
        "pipeline.py"
    }
}

/// A file of the reference fixtures in the repository (`<workspace>/tests/fixtures`), read
/// whole; a missing file fails the test with its path and the command that regenerates it.
pub fn fixture_bytes(relative: &str) -> Vec<u8> {
    let mut path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    path.extend(relative.split('/'));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "fixture {}: {e}; regenerate with `python scripts/fixtures/{} --official PATH` \
             (see tests/fixtures/README.md)",
            path.display(),
            generator_of(relative)
        )
    })
}

/// The u8 tensors of a safetensors fixture.
pub struct FixtureTensors {
    name: String,
    bytes: Vec<u8>,
}

impl FixtureTensors {
    pub fn load(relative: &str) -> Self {
        Self {
            name: relative.to_string(),
            bytes: fixture_bytes(relative),
        }
    }

    /// The shape and values of the u8 tensor `key`.
    pub fn u8(&self, key: &str) -> (Vec<usize>, Vec<u8>) {
        let file = safetensors::SafeTensors::deserialize(&self.bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        let tensor = file
            .tensor(key)
            .unwrap_or_else(|e| panic!("{}: key {key}: {e}", self.name));
        assert_eq!(
            tensor.dtype(),
            safetensors::Dtype::U8,
            "{}: {key}",
            self.name
        );
        (tensor.shape().to_vec(), tensor.data().to_vec())
    }
}

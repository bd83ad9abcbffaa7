//! Prediction pictures: raw trainId PNGs, Cityscapes labelId PNGs, palette colours, and
//! overlays blended on the input image.

use std::path::{Path, PathBuf};

use image::{DynamicImage, GrayImage, RgbImage};
use segburn_data::label_ids::to_label_ids;

/// A picture could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PictureError {
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: image::ImageError,
    },
    #[error("cannot create the folder {}: {source}", path.display())]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} has {got} values, expected {expected} for {width}x{height}")]
    Size {
        what: &'static str,
        got: usize,
        expected: usize,
        width: usize,
        height: usize,
    },
}

/// The weight of the class colour in an overlay.
pub const OVERLAY_ALPHA: f32 = 0.5;

/// The colour of pixels without a class (ignore value, or an id beyond the palette).
const NO_CLASS: [u8; 3] = [0, 0, 0];

/// Which pictures to write, and into which folder.
#[derive(Debug, Clone)]
pub struct PictureWriter {
    dir: PathBuf,
    palette: Vec<[u8; 3]>,
    label_ids: bool,
}

/// One predicted image: class ids `[H, W]` and the input as interleaved RGB.
#[derive(Debug, Clone, Copy)]
pub struct Prediction<'a> {
    pub name: &'a str,
    pub width: usize,
    pub height: usize,
    pub classes: &'a [u8],
    pub rgb: &'a [u8],
}

impl PictureWriter {
    /// Pictures go into `dir/train_ids`, `dir/colour`, `dir/overlay` (and `dir/label_ids` when
    /// `label_ids` is set: Cityscapes only).
    pub fn new(dir: &Path, palette: &[[u8; 3]], label_ids: bool) -> Result<Self, PictureError> {
        let mut folders = vec!["train_ids", "colour", "overlay"];
        if label_ids {
            folders.push("label_ids");
        }
        for folder in folders {
            let path = dir.join(folder);
            std::fs::create_dir_all(&path)
                .map_err(|source| PictureError::Folder { path, source })?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            palette: palette.to_vec(),
            label_ids,
        })
    }

    /// The folder pictures go into.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes every picture of `prediction`; returns the paths written.
    pub fn write(&self, prediction: &Prediction<'_>) -> Result<Vec<PathBuf>, PictureError> {
        let Prediction {
            name,
            width,
            height,
            classes,
            rgb,
        } = *prediction;
        check_len(
            "the prediction",
            classes.len(),
            width * height,
            width,
            height,
        )?;
        check_len("the image", rgb.len(), 3 * width * height, width, height)?;
        let file = format!("{}.png", file_stem(name));
        let mut written = Vec::new();
        // Lengths were checked above, so `from_raw` cannot fail.
        let mut save = |folder: &str, picture: DynamicImage| -> Result<(), PictureError> {
            let path = self.dir.join(folder).join(&file);
            picture.save(&path).map_err(|source| PictureError::Write {
                path: path.clone(),
                source,
            })?;
            written.push(path);
            Ok(())
        };
        let (w, h) = (width as u32, height as u32);
        let grey = |values: Vec<u8>| {
            DynamicImage::ImageLuma8(GrayImage::from_raw(w, h, values).expect("length checked"))
        };
        let rgb_image = |values: Vec<u8>| {
            DynamicImage::ImageRgb8(RgbImage::from_raw(w, h, values).expect("length checked"))
        };
        save("train_ids", grey(classes.to_vec()))?;
        if self.label_ids {
            save("label_ids", grey(to_label_ids(classes)))?;
        }
        let colour = colourise(classes, &self.palette);
        let overlay = blend(rgb, &colour, OVERLAY_ALPHA);
        save("colour", rgb_image(colour))?;
        save("overlay", rgb_image(overlay))?;
        Ok(written)
    }
}

fn check_len(
    what: &'static str,
    got: usize,
    expected: usize,
    width: usize,
    height: usize,
) -> Result<(), PictureError> {
    if got == expected {
        Ok(())
    } else {
        Err(PictureError::Size {
            what,
            got,
            expected,
            width,
            height,
        })
    }
}

/// A sample name as one file name: path separators and characters that some file systems
/// refuse become `_`; letters of any script are kept.
pub fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| match c {
            '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect();
    if stem.is_empty() {
        "prediction".to_string()
    } else {
        stem
    }
}

/// Class ids to palette colours, interleaved RGB.
pub fn colourise(classes: &[u8], palette: &[[u8; 3]]) -> Vec<u8> {
    classes
        .iter()
        .flat_map(|&c| palette.get(usize::from(c)).copied().unwrap_or(NO_CLASS))
        .collect()
}

/// `(1 - alpha) · image + alpha · colour`, rounded.
pub fn blend(image: &[u8], colour: &[u8], alpha: f32) -> Vec<u8> {
    image
        .iter()
        .zip(colour)
        .map(|(&i, &c)| ((1.0 - alpha) * f32::from(i) + alpha * f32::from(c)).round() as u8)
        .collect()
}

/// Planar normalised `[3, H, W]` back to interleaved 8-bit RGB: `(x · std + mean) · 255`.
pub fn denormalise(planar: &[f32], mean: [f32; 3], std: [f32; 3]) -> Vec<u8> {
    let pixels = planar.len() / 3;
    let mut rgb = vec![0u8; 3 * pixels];
    for channel in 0..3 {
        let plane = &planar[channel * pixels..(channel + 1) * pixels];
        for (i, &x) in plane.iter().enumerate() {
            let value = (x * std[channel] + mean[channel]) * 255.0;
            rgb[3 * i + channel] = value.round().clamp(0.0, 255.0) as u8;
        }
    }
    rgb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denormalising_inverts_the_loader_normalisation() {
        let (mean, std) = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
        let rgb = [0u8, 128, 255, 10, 20, 30];
        let mut planar = vec![0f32; 6];
        for i in 0..2 {
            for c in 0..3 {
                planar[c * 2 + i] = (f32::from(rgb[3 * i + c]) / 255.0 - mean[c]) / std[c];
            }
        }
        assert_eq!(denormalise(&planar, mean, std), rgb.to_vec());
    }

    #[test]
    fn colours_blend_and_names_are_file_safe() {
        let palette = [[255, 0, 0], [0, 255, 0]];
        assert_eq!(
            colourise(&[1, 0, 255], &palette),
            vec![0, 255, 0, 255, 0, 0, 0, 0, 0]
        );
        assert_eq!(blend(&[100, 0], &[200, 255], 0.5), vec![150, 128]);
        assert_eq!(file_stem("aachen/aachen_000000"), "aachen_aachen_000000");
        assert_eq!(file_stem("données 数据"), "données 数据");
    }

    #[test]
    fn writes_each_picture_and_names_bad_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let writer =
            PictureWriter::new(&dir.path().join("données 数据"), &[[1, 2, 3]; 19], true).unwrap();
        let prediction = Prediction {
            name: "a/b",
            width: 2,
            height: 1,
            classes: &[0, 13],
            rgb: &[0; 6],
        };
        let written = writer.write(&prediction).unwrap();
        assert_eq!(written.len(), 4);
        let label_ids = image::open(writer.dir().join("label_ids/a_b.png"))
            .unwrap()
            .into_luma8();
        assert_eq!(label_ids.into_raw(), vec![7, 26]);
        let bad = Prediction {
            classes: &[0],
            ..prediction
        };
        assert!(writer
            .write(&bad)
            .unwrap_err()
            .to_string()
            .contains("prediction"));
    }
}

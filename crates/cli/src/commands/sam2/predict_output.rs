//! What `predict-sam2` writes for one prediction, whichever model made it: the best of the
//! decoder's masks at the image's resolution as `<stem>_mask.png` (0 / 255), the image with the
//! mask tinted and the prompts drawn as `<stem>_overlay.png`, and a summary line.

use std::path::Path;

use anyhow::Context;
use burn::tensor::{backend::Backend, Tensor};
use segburn_data::decode::RgbImage;
use segburn_train::sam2::prompts::{Click, POSITIVE};
use segburn_train::sam2::user_prompts::ImagePrompts;

use crate::output::pictures::{blend, file_stem};

/// The mask chosen among the decoder's proposals.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenMask {
    /// `H × W`, 255 where the logit is above 0, else 0.
    pub mask: Vec<u8>,
    /// Predicted IoU of every proposal.
    pub ious: Vec<f32>,
    /// The proposal kept: the highest predicted IoU (the first one on a tie), as the official
    /// examples pick among SAM2ImagePredictor's masks.
    pub best: usize,
    /// The object-score logit (≤ 0: the model sees no object).
    pub object_score: f32,
}

/// Picks the proposal with the highest predicted IoU. `masks`: `[1, M, H, W]` logits at the
/// image's resolution; `iou_pred`: `[1, M]`; `object_score_logits`: `[1, 1]`.
pub fn choose_mask<B: Backend>(
    masks: Tensor<B, 4>,
    iou_pred: Tensor<B, 2>,
    object_score_logits: Tensor<B, 2>,
) -> ChosenMask {
    let ious: Vec<f32> = iou_pred.into_data().iter::<f32>().collect();
    let best = ious
        .iter()
        .enumerate()
        .fold(0, |b, (i, v)| if *v > ious[b] { i } else { b });
    let object_score = object_score_logits
        .into_data()
        .iter::<f32>()
        .next()
        .unwrap_or(0.0);
    let mask = masks
        .narrow(1, best, 1)
        .into_data()
        .iter::<f32>()
        .map(|v| if v > 0.0 { 255 } else { 0 })
        .collect();
    ChosenMask {
        mask,
        ious,
        best,
        object_score,
    }
}

/// The stem of every file written for `image_path`.
pub fn output_stem(image_path: &Path) -> String {
    file_stem(
        &image_path
            .file_stem()
            .map_or("image".into(), |s| s.to_string_lossy().into_owned()),
    )
}

/// Writes the mask and the overlay of `image` (read from `image_path`) into `out` and prints
/// where they are.
pub fn write_prediction(
    out: &Path,
    image_path: &Path,
    image: &RgbImage,
    prompts: &ImagePrompts,
    chosen: &ChosenMask,
) -> anyhow::Result<()> {
    let (width, height) = (image.width, image.height);
    let mask = &chosen.mask;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let stem = output_stem(image_path);
    let mask_path = out.join(format!("{stem}_mask.png"));
    let overlay_path = out.join(format!("{stem}_overlay.png"));
    save_png(
        &mask_path,
        width,
        height,
        image::ExtendedColorType::L8,
        mask,
    )?;
    let tint: Vec<u8> = mask
        .iter()
        .flat_map(|&m| if m > 0 { [255, 40, 40] } else { [0, 0, 0] })
        .collect();
    let mut overlay: Vec<u8> = blend(&image.pixels, &tint, 0.5)
        .into_iter()
        .zip(mask.iter().flat_map(|&m| [m, m, m]))
        .zip(&image.pixels)
        .map(|((blended, m), &original)| if m > 0 { blended } else { original })
        .collect();
    draw_prompts(&mut overlay, width, height, prompts);
    save_png(
        &overlay_path,
        width,
        height,
        image::ExtendedColorType::Rgb8,
        &overlay,
    )?;
    let area = mask.iter().filter(|&&m| m > 0).count();
    let others = if chosen.ious.len() > 1 {
        let all: Vec<String> = chosen.ious.iter().map(|v| format!("{v:.3}")).collect();
        format!(
            " (mask {} of {}: {})",
            chosen.best + 1,
            chosen.ious.len(),
            all.join(", ")
        )
    } else {
        String::new()
    };
    let object = chosen.object_score;
    println!(
        "mask {} ({} px, {:.1} % of the {width}×{height} image), predicted IoU {:.3}{others}, \
         object score {:.2}{}\noverlay {}",
        mask_path.display(),
        area,
        100.0 * area as f64 / (width * height) as f64,
        chosen.ious.get(chosen.best).copied().unwrap_or(f32::NAN),
        object,
        if object <= 0.0 {
            " (≤ 0: the model thinks no object is there)"
        } else {
            ""
        },
        overlay_path.display()
    );
    Ok(())
}

/// Green crosses for positive clicks, blue for negative ones, a yellow box outline.
fn draw_prompts(rgb: &mut [u8], width: usize, height: usize, prompts: &ImagePrompts) {
    let mut put = |x: i64, y: i64, colour: [u8; 3]| {
        if (0..width as i64).contains(&x) && (0..height as i64).contains(&y) {
            let at = 3 * (y as usize * width + x as usize);
            rgb[at..at + 3].copy_from_slice(&colour);
        }
    };
    for &Click { x, y, label } in &prompts.clicks {
        let colour = if label == POSITIVE {
            [40, 220, 40]
        } else {
            [40, 80, 255]
        };
        let (x, y) = (x.round() as i64, y.round() as i64);
        for d in -4..=4 {
            put(x + d, y, colour);
            put(x, y + d, colour);
        }
    }
    if let Some([x0, y0, x1, y1]) = prompts.bbox {
        let (x0, y0, x1, y1) = (x0 as i64, y0 as i64, x1 as i64, y1 as i64);
        for x in x0..=x1 {
            put(x, y0, [255, 220, 0]);
            put(x, y1, [255, 220, 0]);
        }
        for y in y0..=y1 {
            put(x0, y, [255, 220, 0]);
            put(x1, y, [255, 220, 0]);
        }
    }
}

/// Writes `data` (`colour` pixels, row-major) as a PNG, naming the file on failure.
pub(crate) fn save_png(
    path: &Path,
    width: usize,
    height: usize,
    colour: image::ExtendedColorType,
    data: &[u8],
) -> anyhow::Result<()> {
    image::save_buffer_with_format(
        path,
        data,
        width as u32,
        height as u32,
        colour,
        image::ImageFormat::Png,
    )
    .with_context(|| format!("cannot write {}", path.display()))
}

//! What `predict-sam2 --everything` writes for the records of
//! [`segburn_models::sam2::automatic::AutomaticMaskGenerator`]: `<stem>_everything.png` (the
//! image with every mask tinted in its own colour, larger masks first so smaller ones stay
//! visible, as the official notebook's `show_anns` draws them), `<stem>_masks/<i>.png` (one
//! 0 / 255 mask per record, in the records' order) and `<stem>_masks.json` (the records with
//! the official keys, `segmentation` as COCO's compressed RLE).

use std::path::{Path, PathBuf};

use anyhow::Context;
use segburn_data::decode::RgbImage;
use segburn_models::sam2::automatic::MaskRecord;
use serde_json::{json, Value};

use crate::commands::sam2::predict_output::save_png;
use crate::output::pictures::file_stem;

/// Where [`write_everything`] put its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EverythingFiles {
    pub overlay: PathBuf,
    pub masks: PathBuf,
    pub records: PathBuf,
}

/// Writes the overlay, the per-mask PNGs and the JSON records of `records` (found on `image`,
/// read from `image_path`) into `out`.
pub fn write_everything(
    out: &Path,
    image_path: &Path,
    image: &RgbImage,
    records: &[MaskRecord],
) -> anyhow::Result<EverythingFiles> {
    let stem = file_stem(
        &image_path
            .file_stem()
            .map_or("image".into(), |s| s.to_string_lossy().into_owned()),
    );
    let files = EverythingFiles {
        overlay: out.join(format!("{stem}_everything.png")),
        masks: out.join(format!("{stem}_masks")),
        records: out.join(format!("{stem}_masks.json")),
    };
    std::fs::create_dir_all(&files.masks)
        .with_context(|| format!("cannot create {}", files.masks.display()))?;
    let (width, height) = (image.width, image.height);
    let mut overlay = image.pixels.clone();
    let mut by_area: Vec<usize> = (0..records.len()).collect();
    by_area.sort_by_key(|&i| std::cmp::Reverse(records[i].area));
    for &i in &by_area {
        let mask = records[i].segmentation.decode();
        let colour = colour_of(i);
        for (pixel, _) in overlay
            .chunks_mut(3)
            .zip(&mask.data)
            .filter(|(_, &set)| set)
        {
            for (value, tint) in pixel.iter_mut().zip(colour) {
                *value = ((u16::from(*value) + u16::from(tint)) / 2) as u8;
            }
        }
    }
    save_png(
        &files.overlay,
        width,
        height,
        image::ExtendedColorType::Rgb8,
        &overlay,
    )?;
    for (i, record) in records.iter().enumerate() {
        let mask: Vec<u8> = record
            .segmentation
            .decode()
            .data
            .iter()
            .map(|&set| if set { 255 } else { 0 })
            .collect();
        let path = files.masks.join(format!("{i:04}.png"));
        save_png(&path, width, height, image::ExtendedColorType::L8, &mask)?;
    }
    let json: Vec<Value> = records.iter().map(record_json).collect();
    let text = serde_json::to_string_pretty(&json).context("serialising the mask records")?;
    std::fs::write(&files.records, text + "\n")
        .with_context(|| format!("cannot write {}", files.records.display()))?;
    Ok(files)
}

/// One record with the official generator's keys (`output_mode="coco_rle"`).
pub fn record_json(record: &MaskRecord) -> Value {
    let [height, width] = record.segmentation.size;
    json!({
        "segmentation": {
            "size": [height, width],
            "counts": record.segmentation.to_coco_string(),
        },
        "area": record.area,
        "bbox": record.bbox,
        "predicted_iou": record.predicted_iou,
        "point_coords": [record.point_coords],
        "stability_score": record.stability_score,
        "crop_box": record.crop_box,
    })
}

/// A bright colour per mask: hues a golden angle apart, so neighbours in the list differ.
fn colour_of(index: usize) -> [u8; 3] {
    let hue = (index as f64 * 137.507_764) % 360.0;
    let sector = hue / 60.0;
    let rising = (255.0 * (sector % 1.0)) as u8;
    let falling = 255 - rising;
    match sector as u32 {
        0 => [255, rising, 40],
        1 => [falling, 255, 40],
        2 => [40, 255, rising],
        3 => [40, falling, 255],
        4 => [rising, 40, 255],
        _ => [255, 40, falling],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use segburn_models::sam2::automatic::{BinaryMask, Rle};

    fn record(mask: &[bool], area: u64, iou: f32) -> MaskRecord {
        let mask = BinaryMask::new(2, 3, mask.to_vec()).expect("2 × 3");
        MaskRecord {
            segmentation: Rle::encode(&mask),
            area,
            bbox: [0, 0, 1, 1],
            predicted_iou: iou,
            point_coords: [0.5, 0.5],
            stability_score: 0.97,
            crop_box: [0, 0, 3, 2],
        }
    }

    #[test]
    fn writes_every_mask_the_overlay_and_coco_records() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let image = RgbImage {
            width: 3,
            height: 2,
            pixels: vec![100; 18],
        };
        // A large mask (left two columns) and a small one (top-left pixel) on top of it.
        let records = [
            record(&[true, true, false, true, true, false], 4, 0.9),
            record(&[true, false, false, false, false, false], 1, 0.8),
        ];
        let files = write_everything(dir.path(), Path::new("photo.jpg"), &image, &records)
            .expect("written");
        assert_eq!(files.overlay, dir.path().join("photo_everything.png"));

        let mask = image::open(files.masks.join("0000.png"))
            .expect("mask 0")
            .to_luma8();
        assert_eq!(mask.as_raw(), &vec![255, 255, 0, 255, 255, 0]);
        assert!(files.masks.join("0001.png").is_file());

        // The small mask is drawn after (over) the large one; untouched pixels keep the image.
        let overlay = image::open(&files.overlay).expect("overlay").to_rgb8();
        let large = colour_of(0).map(|c| ((100 + u16::from(c)) / 2) as u8);
        assert_eq!(overlay.get_pixel(1, 0).0, large);
        assert_eq!(overlay.get_pixel(2, 0).0, [100, 100, 100]);
        let top_left = overlay.get_pixel(0, 0).0;
        for channel in 0..3 {
            let expected = (u16::from(large[channel]) + u16::from(colour_of(1)[channel])) / 2;
            assert_eq!(u16::from(top_left[channel]), expected);
        }

        let text = std::fs::read_to_string(&files.records).expect("records");
        let json: Vec<Value> = serde_json::from_str(&text).expect("JSON");
        assert_eq!(json.len(), 2);
        assert_eq!(json[0]["segmentation"]["size"], json!([2, 3]));
        let counts = json[0]["segmentation"]["counts"]
            .as_str()
            .expect("a string");
        let decoded = Rle::from_coco_string([2, 3], counts).expect("valid COCO RLE");
        assert_eq!(decoded, records[0].segmentation);
        assert_eq!(json[1]["area"], json!(1));
        assert_eq!(json[1]["point_coords"], json!([[0.5, 0.5]]));
    }
}

//! The generator: crops, a grid of clicks on each, the batch filters, NMS within each crop and
//! across crops, and the records (upstream's `SAM2AutomaticMaskGenerator.generate`).

use burn::tensor::backend::Backend;

use super::batch::{process_batch, Candidate};
use super::config::AutomaticMaskGeneratorConfig;
use super::crops::{crop_boxes, crop_rgb, xyxy_to_xywh, CropBox};
use super::grid::layer_point_grids;
use super::nms::box_nms;
use super::rle::Rle;
use crate::sam2::{Sam2, Sam2Error, Sam2ImagePredictor};

/// One mask found by [`AutomaticMaskGenerator::generate`], with upstream's record fields.
#[derive(Debug, Clone, PartialEq)]
pub struct MaskRecord {
    /// The mask over the whole image as an uncompressed COCO RLE: [`Rle::decode`] gives the
    /// binary mask (upstream's `binary_mask` mode), [`Rle::to_coco_string`] the `coco_rle` one.
    pub segmentation: Rle,
    /// Pixels in the mask.
    pub area: u64,
    /// `[x, y, w, h]` of the mask, with `w = x1 - x0` of the inclusive ends as upstream.
    pub bbox: [usize; 4],
    /// The decoder's IoU estimate.
    pub predicted_iou: f32,
    /// The click `(x, y)` that produced the mask, image pixels.
    pub point_coords: [f32; 2],
    /// See [`super::stability_scores`].
    pub stability_score: f32,
    /// `[x, y, w, h]` of the crop the mask was found in.
    pub crop_box: [usize; 4],
}

/// A kept mask in the whole image's frame, before the cross-crop NMS.
struct Found {
    rle: Rle,
    bbox: [usize; 4],
    predicted_iou: f32,
    point: [f32; 2],
    stability_score: f32,
    crop: CropBox,
}

/// "Segment everything": prompts a model with a grid of clicks over an image (and over crops
/// of it) and keeps the good, distinct masks.
pub struct AutomaticMaskGenerator<'m, B: Backend> {
    model: &'m Sam2<B>,
    config: AutomaticMaskGeneratorConfig,
    point_grids: Vec<Vec<[f64; 2]>>,
}

impl<'m, B: Backend> AutomaticMaskGenerator<'m, B> {
    /// A generator for `model` (which needs an image encoder); refuses invalid settings.
    pub fn new(
        model: &'m Sam2<B>,
        config: AutomaticMaskGeneratorConfig,
    ) -> Result<Self, Sam2Error> {
        config.validate()?;
        let point_grids = layer_point_grids(
            config.points_per_side,
            config.crop_n_layers,
            config.crop_n_points_downscale_factor,
        );
        Ok(Self {
            model,
            config,
            point_grids,
        })
    }

    /// The settings.
    pub fn config(&self) -> &AutomaticMaskGeneratorConfig {
        &self.config
    }

    /// The masks of an RGB image (`height × width × 3` bytes, row-major), in upstream's order:
    /// by predicted IoU within a crop when there is one crop, by crop size (smallest first)
    /// then IoU when there are several.
    pub fn generate(
        &self,
        rgb: &[u8],
        size: [usize; 2],
        device: &B::Device,
    ) -> Result<Vec<MaskRecord>, Sam2Error> {
        let [height, width] = size;
        if rgb.len() != height * width * 3 || height == 0 || width == 0 {
            return Err(Sam2Error::shape(format!(
                "the image has {} bytes, but a {height}×{width} RGB image needs {}",
                rgb.len(),
                height * width * 3
            )));
        }
        let crops = crop_boxes(
            size,
            self.config.crop_n_layers,
            self.config.crop_overlap_ratio,
        );
        let mut found = Vec::new();
        for &(crop, layer) in &crops {
            found.extend(self.process_crop(rgb, size, crop, layer, device)?);
        }
        if crops.len() > 1 {
            // Prefer masks from smaller crops: the score is 1 / crop area, in f32 as upstream.
            let boxes: Vec<[f32; 4]> = found.iter().map(|f| f32_box(f.bbox)).collect();
            let scores: Vec<f32> = found
                .iter()
                .map(|f| 1.0 / ((f.crop[2] - f.crop[0]) * (f.crop[3] - f.crop[1])) as f32)
                .collect();
            let keep = box_nms(&boxes, &scores, self.config.crop_nms_thresh);
            found = reorder(found, &keep);
        }
        Ok(found.into_iter().map(record).collect())
    }

    /// upstream's `_process_crop`: encode the crop, run its clicks in batches, NMS within the
    /// crop, and move the survivors to the image's frame.
    fn process_crop(
        &self,
        rgb: &[u8],
        size: [usize; 2],
        crop: CropBox,
        layer: usize,
        device: &B::Device,
    ) -> Result<Vec<Found>, Sam2Error> {
        let [x0, y0, x1, y1] = crop;
        let crop_size = [y1 - y0, x1 - x0];
        let pixels = crop_rgb(rgb, size, crop);
        let predictor = Sam2ImagePredictor::set_image(self.model, &pixels, crop_size, device)?;
        // Grid (f64) times the crop's size, cast to f32 once, as upstream's numpy → torch.
        let points: Vec<[f32; 2]> = self.point_grids[layer]
            .iter()
            .map(|&[x, y]| {
                [
                    (x * crop_size[1] as f64) as f32,
                    (y * crop_size[0] as f64) as f32,
                ]
            })
            .collect();
        let mut candidates: Vec<Candidate> = Vec::new();
        for batch in points.chunks(self.config.points_per_batch) {
            candidates.extend(process_batch(
                self.model,
                &predictor,
                batch,
                crop,
                size,
                &self.config,
            )?);
        }
        let boxes: Vec<[f32; 4]> = candidates.iter().map(|c| f32_box(c.bbox)).collect();
        let scores: Vec<f32> = candidates.iter().map(|c| c.predicted_iou).collect();
        let keep = box_nms(&boxes, &scores, self.config.box_nms_thresh);
        Ok(reorder(candidates, &keep)
            .into_iter()
            .map(|c| Found {
                rle: Rle::encode(&c.mask.uncrop([x0, y0], size)),
                bbox: [
                    c.bbox[0] + x0,
                    c.bbox[1] + y0,
                    c.bbox[2] + x0,
                    c.bbox[3] + y0,
                ],
                predicted_iou: c.predicted_iou,
                point: [c.point[0] + x0 as f32, c.point[1] + y0 as f32],
                stability_score: c.stability_score,
                crop,
            })
            .collect())
    }
}

fn f32_box(bbox: [usize; 4]) -> [f32; 4] {
    bbox.map(|v| v as f32)
}

/// The items at `keep`, in that order.
fn reorder<T>(items: Vec<T>, keep: &[usize]) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    keep.iter().filter_map(|&i| slots[i].take()).collect()
}

fn record(found: Found) -> MaskRecord {
    MaskRecord {
        area: found.rle.area(),
        segmentation: found.rle,
        bbox: xyxy_to_xywh(found.bbox),
        predicted_iou: found.predicted_iou,
        point_coords: found.point,
        stability_score: found.stability_score,
        crop_box: xyxy_to_xywh(found.crop),
    }
}

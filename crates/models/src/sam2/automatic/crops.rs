//! The crops that "segment everything" runs on: the whole image (layer 0), then `2^i × 2^i`
//! overlapping crops on layer `i`, and the rules that move masks between a crop and the image.

/// A crop `[x0, y0, x1, y1]` in image pixels (end-exclusive).
pub type CropBox = [usize; 4];

/// Every crop with its layer, in upstream's order (`generate_crop_boxes`): the whole image,
/// then per layer the crops with `x0` in the outer loop and `y0` in the inner one.
///
/// The arithmetic is f64 as in upstream (Python floats), with the same truncations
/// (`int(...)`) and ceilings, so the boxes agree to the pixel.
pub fn crop_boxes(
    [height, width]: [usize; 2],
    crop_layers: usize,
    overlap_ratio: f64,
) -> Vec<(CropBox, usize)> {
    let short_side = height.min(width) as f64;
    let mut boxes = vec![([0, 0, width, height], 0)];
    for layer in 0..crop_layers {
        let per_side = 1usize << (layer + 1);
        let overlap = (overlap_ratio * short_side * (2.0 / per_side as f64)) as usize;
        let crop_width = crop_length(width, per_side, overlap);
        let crop_height = crop_length(height, per_side, overlap);
        let starts = |length: usize| -> Vec<usize> {
            (0..per_side)
                .map(|i| (length.saturating_sub(overlap)) * i)
                .collect()
        };
        for &x0 in &starts(crop_width) {
            for &y0 in &starts(crop_height) {
                let crop = [
                    x0,
                    y0,
                    (x0 + crop_width).min(width),
                    (y0 + crop_height).min(height),
                ];
                boxes.push((crop, layer + 1));
            }
        }
    }
    boxes
}

/// Length of one of `crops` crops covering `length` with `overlap` pixels shared by
/// neighbours.
fn crop_length(length: usize, crops: usize, overlap: usize) -> usize {
    ((overlap * (crops - 1) + length) as f64 / crops as f64).ceil() as usize
}

/// Whether a box `[x0, y0, x1, y1]` (crop frame, inclusive ends as upstream's
/// `batched_mask_to_box`) lies within 20 px of a crop edge that is not also an image edge:
/// such a mask is probably cut by the crop and a larger crop sees it whole.
pub fn is_near_crop_edge(bbox: [usize; 4], crop: CropBox, [height, width]: [usize; 2]) -> bool {
    const TOLERANCE: f32 = 20.0;
    let image = [0, 0, width, height];
    let shifted = [
        bbox[0] + crop[0],
        bbox[1] + crop[1],
        bbox[2] + crop[0],
        bbox[3] + crop[1],
    ];
    // Upstream compares in f32 (`torch.isclose(..., atol=20, rtol=0)`).
    let close = |a: usize, b: usize| (a as f32 - b as f32).abs() <= TOLERANCE;
    (0..4).any(|i| close(shifted[i], crop[i]) && !close(shifted[i], image[i]))
}

/// Box `[x0, y0, x1, y1]` as `[x, y, w, h]`, as upstream's `box_xyxy_to_xywh` (no `+1`:
/// a one-pixel mask has width 0).
pub fn xyxy_to_xywh([x0, y0, x1, y1]: [usize; 4]) -> [usize; 4] {
    [x0, y0, x1 - x0, y1 - y0]
}

/// The pixels of `crop` from an RGB image (`height × width × 3`, row-major).
pub fn crop_rgb(rgb: &[u8], [_, width]: [usize; 2], crop: CropBox) -> Vec<u8> {
    let [x0, y0, x1, y1] = crop;
    (y0..y1)
        .flat_map(|y| &rgb[(y * width + x0) * 3..(y * width + x1) * 3])
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_layer_matches_upstream() {
        // Official `generate_crop_boxes((600, 800), 1, 512 / 1500)`.
        let boxes = crop_boxes([600, 800], 1, 512.0 / 1500.0);
        let expected: Vec<(CropBox, usize)> = vec![
            ([0, 0, 800, 600], 0),
            ([0, 0, 502, 402], 1),
            ([0, 198, 502, 600], 1),
            ([298, 0, 800, 402], 1),
            ([298, 198, 800, 600], 1),
        ];
        assert_eq!(boxes, expected);
    }

    #[test]
    fn two_layers_match_upstream() {
        // Official `generate_crop_boxes((375, 500), 2, 512 / 1500)`: layer 2's x0 are
        // 0, 109, 218, 327 and y0 are 0, 78, 156, 234 with 173 × 142 crops.
        let boxes = crop_boxes([375, 500], 2, 512.0 / 1500.0);
        assert_eq!(boxes.len(), 21);
        assert_eq!(
            &boxes[1..5],
            &[
                ([0, 0, 314, 252], 1),
                ([0, 124, 314, 375], 1),
                ([186, 0, 500, 252], 1),
                ([186, 124, 500, 375], 1),
            ]
        );
        let layer2: Vec<CropBox> = boxes[5..].iter().map(|(b, _)| *b).collect();
        let mut expected = Vec::new();
        for x0 in [0, 109, 218, 327] {
            for y0 in [0, 78, 156, 234] {
                expected.push([x0, y0, (x0 + 173).min(500), (y0 + 142).min(375)]);
            }
        }
        assert_eq!(layer2, expected);
        assert!(boxes[5..].iter().all(|(_, layer)| *layer == 2));
        // The 600 × 800 case's last layer-2 crop, also from the official function.
        let big = crop_boxes([600, 800], 2, 512.0 / 1500.0);
        assert_eq!(big[20], ([525, 375, 800, 600], 2));
        assert_eq!(big[5], ([0, 0, 277, 227], 2));
    }

    #[test]
    fn edge_rule_ignores_image_edges() {
        // Crop [298, 198, 800, 600] of an 800 × 600 image. Boxes in the crop frame:
        let crop = [298, 198, 800, 600];
        // touches the crop's left edge (x0 + 298 = 308, within 20 of 298): cut by the crop;
        assert!(is_near_crop_edge([10, 100, 50, 150], crop, [600, 800]));
        // touches the right and bottom edges, which are the image's own: kept;
        assert!(!is_near_crop_edge([300, 300, 501, 401], crop, [600, 800]));
        // 21 px from the top edge: kept.
        assert!(!is_near_crop_edge([100, 21, 200, 200], crop, [600, 800]));
        // The whole image as crop: nothing is ever near a crop-only edge.
        assert!(!is_near_crop_edge(
            [0, 0, 799, 599],
            [0, 0, 800, 600],
            [600, 800]
        ));
    }

    #[test]
    fn crop_rgb_copies_the_window() {
        // A 2 × 3 image whose pixel (x, y) has all channels 10·y + x.
        let rgb: Vec<u8> = (0..2)
            .flat_map(|y| (0..3).flat_map(move |x| [10 * y + x; 3]))
            .collect();
        assert_eq!(
            crop_rgb(&rgb, [2, 3], [1, 1, 3, 2]),
            vec![11, 11, 11, 12, 12, 12]
        );
        assert_eq!(xyxy_to_xywh([3, 4, 3, 10]), [3, 4, 0, 6]);
    }
}

//! Tests of the fused augmentation against a literal resize → pad → crop → flip pipeline.

use super::*;

/// The official steps one by one on whole images: the definition `render` must match.
fn literal(
    image: &RgbImage,
    label: &[u8],
    g: &Geometry,
    normaliser: &Normaliser,
    ignore: u8,
) -> (Vec<f32>, Vec<u8>) {
    let (sw, sh) = (g.scaled_width, g.scaled_height);
    let (w, h) = (g.source_width, g.source_height);
    // 1. resize everything.
    let mut resized = vec![0u8; sw * sh * 3];
    let mut resized_label = vec![0u8; sw * sh];
    for y in 0..sh {
        let ty = bilinear_tap(y, h, sh);
        for x in 0..sw {
            let tx = bilinear_tap(x, w, sw);
            for c in 0..3 {
                let px = |yy: usize, xx: usize| u32::from(image.pixels[(yy * w + xx) * 3 + c]);
                let upper = px(ty.first, tx.first) * tx.first_weight
                    + px(ty.first, tx.second) * tx.second_weight;
                let lower = px(ty.second, tx.first) * tx.first_weight
                    + px(ty.second, tx.second) * tx.second_weight;
                resized[(y * sw + x) * 3 + c] =
                    ((upper * ty.first_weight + lower * ty.second_weight + ROUND) >> 22) as u8;
            }
            resized_label[y * sw + x] = label[nearest(y, h, sh) * w + nearest(x, w, sw)];
        }
    }
    // 2. pad to at least the output size.
    let (pw, ph) = (sw.max(g.crop_x + g.width), sh.max(g.crop_y + g.height));
    let mut padded = vec![0u8; pw * ph * 3];
    let mut padded_label = vec![ignore; pw * ph];
    for y in 0..sh {
        padded[y * pw * 3..y * pw * 3 + sw * 3]
            .copy_from_slice(&resized[y * sw * 3..(y + 1) * sw * 3]);
        padded_label[y * pw..y * pw + sw].copy_from_slice(&resized_label[y * sw..(y + 1) * sw]);
    }
    // 3. crop, 4. flip, 5. normalise into planes.
    let mut out = vec![0f32; 3 * g.width * g.height];
    let mut out_label = vec![0u8; g.width * g.height];
    for y in 0..g.height {
        for x in 0..g.width {
            let cx = if g.flip { g.width - 1 - x } else { x };
            let (sy, sx) = (g.crop_y + y, g.crop_x + cx);
            for c in 0..3 {
                out[c * g.width * g.height + y * g.width + x] =
                    normaliser.value(c, padded[(sy * pw + sx) * 3 + c]);
            }
            out_label[y * g.width + x] = padded_label[sy * pw + sx];
        }
    }
    (out, out_label)
}

fn noise_image(w: usize, h: usize, seed: u64) -> RgbImage {
    let mut rng = SplitMix64::new(seed);
    RgbImage {
        width: w,
        height: h,
        pixels: (0..w * h * 3).map(|_| rng.next_u64() as u8).collect(),
    }
}

fn run(
    image: &RgbImage,
    label: &[u8],
    g: &Geometry,
    n: &Normaliser,
) -> (Vec<f32>, Vec<u8>, Vec<u8>) {
    let mut out = vec![f32::NAN; 3 * g.width * g.height];
    let mut out_label = vec![77u8; g.width * g.height];
    let mut out_edges = vec![77u8; g.width * g.height];
    // Edges are resampled exactly like labels: feed the label as "edges" to compare both.
    render(
        image,
        label,
        label,
        g,
        n,
        255,
        SampleSlot {
            image: &mut out,
            label: &mut out_label,
            edges: &mut out_edges,
        },
    );
    for (label, edge) in out_label.iter().zip(&out_edges) {
        // Padding is the ignore index in labels but 0 in edges; elsewhere both sample alike.
        let expected = if *label == 255 { 0 } else { *label };
        assert_eq!(
            *edge, expected,
            "edges and labels must be resampled identically"
        );
    }
    (out, out_label, out_edges)
}

#[test]
fn windowed_render_equals_resize_then_pad_crop_flip() {
    let image = noise_image(23, 17, 1);
    let label: Vec<u8> = (0..23 * 17).map(|i| (i % 7) as u8).collect();
    let n = Normaliser::new([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
    let mut cases = Vec::new();
    for (sw, sh) in [(23, 17), (46, 34), (12, 9), (31, 40), (7, 5)] {
        for flip in [false, true] {
            for (cx, cy) in [(0, 0), (3, 2), (5, 8)] {
                cases.push(Geometry {
                    source_width: 23,
                    source_height: 17,
                    scaled_width: sw,
                    scaled_height: sh,
                    crop_x: cx,
                    crop_y: cy,
                    width: 16,
                    height: 12,
                    flip,
                });
            }
        }
    }
    for g in cases {
        let (fast, fast_label, _) = run(&image, &label, &g, &n);
        let (slow, slow_label) = literal(&image, &label, &g, &n, 255);
        assert_eq!(fast_label, slow_label, "{g:?}");
        assert!(
            fast.iter()
                .zip(&slow)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{g:?}"
        );
    }
}

#[test]
fn bilinear_matches_opencv_on_a_known_case() {
    // cv2.resize(np.array([[0, 255]], np.uint8), (4, 1), interpolation=cv2.INTER_LINEAR)
    // gives [[0, 64, 191, 255]].
    let image = RgbImage {
        width: 2,
        height: 1,
        pixels: vec![0, 0, 0, 255, 255, 255],
    };
    let identity = Normaliser::new([0.0; 3], [1.0 / 255.0; 3]);
    let g = Geometry {
        scaled_width: 4,
        width: 4,
        ..Geometry::identity(2, 1)
    };
    let (out, _, _) = run(&image, &[0, 1], &g, &identity);
    let red: Vec<u8> = out[..4].iter().map(|v| v.round() as u8).collect();
    assert_eq!(red, [0, 64, 191, 255]);
}

#[test]
fn identity_geometry_keeps_every_value() {
    let image = noise_image(9, 5, 3);
    let label: Vec<u8> = (0..45).map(|i| (i % 5) as u8).collect();
    let n = Normaliser::new([0.5; 3], [0.25; 3]);
    let (out, out_label, _) = run(&image, &label, &Geometry::identity(9, 5), &n);
    assert_eq!(out_label, label);
    for y in 0..5 {
        for x in 0..9 {
            for c in 0..3 {
                let expected = n.value(c, image.pixels[(y * 9 + x) * 3 + c]);
                assert_eq!(out[c * 45 + y * 9 + x], expected);
            }
        }
    }
}

#[test]
fn flip_mirrors_image_label_and_edges_together() {
    let image = noise_image(10, 4, 5);
    let label: Vec<u8> = (0..40).map(|i| (i % 10) as u8).collect();
    let n = Normaliser::new([0.0; 3], [1.0; 3]);
    let plain = Geometry::identity(10, 4);
    let flipped = Geometry {
        flip: true,
        ..plain
    };
    let (a, la, _) = run(&image, &label, &plain, &n);
    let (b, lb, _) = run(&image, &label, &flipped, &n);
    for y in 0..4 {
        for x in 0..10 {
            assert_eq!(la[y * 10 + x], lb[y * 10 + 9 - x]);
            for c in 0..3 {
                assert_eq!(a[c * 40 + y * 10 + x], b[c * 40 + y * 10 + 9 - x]);
            }
        }
    }
}

#[test]
fn padding_is_black_ignore_and_no_edge() {
    let image = noise_image(4, 3, 9);
    let label = vec![1u8; 12];
    let n = Normaliser::new([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]);
    let g = Geometry {
        width: 6,
        height: 5,
        ..Geometry::identity(4, 3)
    };
    let (out, out_label, _) = run(&image, &label, &g, &n);
    for y in 0..5 {
        for x in 0..6 {
            let padded = x >= 4 || y >= 3;
            assert_eq!(out_label[y * 6 + x], if padded { 255 } else { 1 });
            if padded {
                for c in 0..3 {
                    assert_eq!(out[c * 30 + y * 6 + x], n.value(c, 0));
                }
            }
        }
    }
}

#[test]
fn drawn_geometry_follows_the_recipe() {
    let config = AugmentConfig::default();
    let mut seen_flip = [false; 2];
    let mut longs = std::collections::BTreeSet::new();
    for seed in 0..400 {
        let mut rng = SplitMix64::new(seed);
        let g = Geometry::draw(2048, 1024, &config, &mut rng);
        assert_eq!((g.width, g.height), (1024, 1024));
        let short = (g.scaled_width as f64 * 1024.0 / 2048.0 + 0.5) as usize;
        assert_eq!(
            g.scaled_height, short,
            "aspect ratio kept as the official code rounds it"
        );
        assert!(g.crop_x + 1024 <= g.scaled_width.max(1024));
        assert!(g.crop_y + 1024 <= g.scaled_height.max(1024));
        seen_flip[usize::from(g.flip)] = true;
        longs.insert(g.scaled_width);
    }
    assert_eq!(seen_flip, [true, true]);
    let expected: std::collections::BTreeSet<usize> = (0..17)
        .map(|k| (2048.0 * (0.5 + k as f64 / 10.0) + 0.5) as usize)
        .collect();
    assert_eq!(
        longs, expected,
        "all 17 official scales appear, nothing else"
    );
    assert_eq!(
        scaled_size(1024, 2048, 2048, 0.5),
        (512, 1024),
        "portrait images scale too"
    );
}

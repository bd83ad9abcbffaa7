//! `resize_rgb8` against Pillow 13.0.0's `Image.resize` (fixture
//! `tests/fixtures/pillow_resize/resize.safetensors`, every byte), and its errors.

use super::*;
use std::path::Path;

const FIXTURE: &str = "pillow_resize/resize.safetensors";
/// The generator's `SAMPLE_STRIDE`: a `.sample` key holds the flattened output `[::97]`.
const SAMPLE_STRIDE: usize = 97;

fn fixture_bytes() -> Vec<u8> {
    let mut path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    path.extend(FIXTURE.split('/'));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "fixture {}: {e}; regenerate with `python scripts/fixtures/pillow_resize.py` \
             (see tests/fixtures/README.md)",
            path.display()
        )
    })
}

fn u8_tensor(file: &safetensors::SafeTensors, key: &str) -> (Vec<usize>, Vec<u8>) {
    let tensor = file.tensor(key).unwrap_or_else(|e| panic!("{key}: {e}"));
    assert_eq!(tensor.dtype(), safetensors::Dtype::U8, "{key}");
    (tensor.shape().to_vec(), tensor.data().to_vec())
}

/// The one value of a u64 `[1]` tensor.
fn u64_value(file: &safetensors::SafeTensors, key: &str) -> u64 {
    let tensor = file.tensor(key).unwrap_or_else(|e| panic!("{key}: {e}"));
    assert_eq!(tensor.dtype(), safetensors::Dtype::U64, "{key}");
    assert_eq!(tensor.shape(), [1], "{key}");
    u64::from_le_bytes(tensor.data().try_into().expect("8 bytes"))
}

/// FNV-1a 64 of `bytes` (the generator's `fnv1a64`).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The generator's `synthetic(h, w, seed)`: tiles of noise, a wrapping gradient and a 0/255
/// checkerboard, in integer arithmetic.
fn synthetic(h: usize, w: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(h * w * 3);
    for y in 0..h as u64 {
        for x in 0..w as u64 {
            for c in 0..3u64 {
                let index = (y * w as u64 + x) * 3 + c;
                let noise = crate::rng::mix(
                    (seed << 32).wrapping_add((index + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                ) >> 56;
                let gradient =
                    (x * 255 / (w as u64 - 1).max(1) + y * 97 / (h as u64 - 1).max(1) + c * 60)
                        % 256;
                let checker = if (x / 2 + y / 3 + c) % 2 == 0 { 0 } else { 255 };
                let value = match (x / 11 + y / 13) % 3 {
                    0 => noise,
                    1 => gradient,
                    _ => checker,
                };
                out.push(value as u8);
            }
        }
    }
    out
}

/// `<stem>_<H>x<W>` -> `[H, W]`; `<H>x<W>` -> `[H, W]`.
fn size_of(name: &str) -> [usize; 2] {
    let dims = name.rsplit('_').next().expect("size");
    let (h, w) = dims
        .split_once('x')
        .unwrap_or_else(|| panic!("size in {name}"));
    [h.parse().expect("height"), w.parse().expect("width")]
}

fn filter_named(name: &str) -> PillowFilter {
    *PillowFilter::ALL
        .iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("filter {name}"))
}

#[test]
fn pillow_resize_matches_pillow_byte_for_byte_on_every_fixture_case() {
    let bytes = fixture_bytes();
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors");
    let mut names: Vec<&str> = file.names();
    names.sort_unstable();
    // The inputs, recomputed from their seed and checked against the stored bytes / digest.
    let mut inputs = std::collections::HashMap::new();
    for name in names.iter().filter_map(|k| k.strip_suffix(".seed")) {
        let [h, w] = size_of(name);
        let rgb = synthetic(h, w, u64_value(&file, &format!("{name}.seed")));
        assert_eq!(
            fnv1a64(&rgb),
            u64_value(&file, &format!("{name}.fnv")),
            "{name}"
        );
        if names.contains(&format!("{name}.rgb").as_str()) {
            let (shape, stored) = u8_tensor(&file, &format!("{name}.rgb"));
            assert_eq!(shape, [h, w, 3], "{name}");
            assert!(
                stored == rgb,
                "{name}: stored input differs from synthetic()"
            );
        }
        inputs.insert(name.to_string(), (rgb, [h, w]));
    }
    assert_eq!(inputs.len(), 7, "inputs");
    let (mut cases, mut compared, mut digested, mut mismatches) = (0, 0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    for key in names.iter().filter_map(|k| k.strip_suffix(".fnv")) {
        let parts: Vec<&str> = key.split('.').collect();
        let [input, filter, size] = parts[..] else {
            continue; // an input's digest
        };
        let (rgb, in_size) = &inputs[input];
        let out_size = size_of(size);
        let out = resize_rgb8(rgb, *in_size, out_size, filter_named(filter)).expect("resize");
        assert_eq!(out.len(), out_size[0] * out_size[1] * 3, "{key}");
        let (expected, stride) = if names.contains(&format!("{key}.out").as_str()) {
            let (shape, full) = u8_tensor(&file, &format!("{key}.out"));
            assert_eq!(shape, [out_size[0], out_size[1], 3], "{key}");
            (full, 1)
        } else {
            (u8_tensor(&file, &format!("{key}.sample")).1, SAMPLE_STRIDE)
        };
        let ours: Vec<u8> = out.iter().step_by(stride).copied().collect();
        assert_eq!(ours.len(), expected.len(), "{key}: stored values");
        let differing = ours.iter().zip(&expected).filter(|(a, b)| a != b).count();
        let digest_ok = fnv1a64(&out) == u64_value(&file, &format!("{key}.fnv"));
        if differing > 0 || !digest_ok {
            let worst = ours
                .iter()
                .zip(&expected)
                .map(|(a, b)| a.abs_diff(*b))
                .max();
            failures.push(format!(
                "{key}: {differing} of {} stored bytes differ (worst {worst:?}), \
                 digest {}",
                expected.len(),
                if digest_ok { "equal" } else { "DIFFERS" }
            ));
        }
        cases += 1;
        compared += expected.len();
        digested += out.len();
        mismatches += differing;
    }
    println!(
        "{cases} cases: {compared} stored bytes compared, {mismatches} differing; \
         {digested} output bytes in FNV-1a digests"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(cases, 38, "cases in the fixture");
}

#[test]
fn pillow_resize_same_size_is_a_copy() {
    let rgb = synthetic(5, 7, 9);
    for filter in PillowFilter::ALL {
        assert_eq!(resize_rgb8(&rgb, [5, 7], [5, 7], filter).unwrap(), rgb);
    }
}

#[test]
fn pillow_resize_one_pixel_spreads_exactly() {
    // One input pixel: every tap has weight 1 (exactly 1 << 22), so any size repeats it.
    for filter in PillowFilter::ALL {
        for size in [[1, 1], [1, 9], [8, 1], [17, 33]] {
            let out = resize_rgb8(&[3, 128, 255], [1, 1], size, filter).unwrap();
            assert!(
                out.chunks(3).all(|p| p == [3, 128, 255]),
                "{filter:?} {size:?}"
            );
        }
    }
}

#[test]
fn pillow_resize_rejects_wrong_lengths_and_sizes_without_panicking() {
    let rgb = vec![0u8; 4 * 6 * 3];
    let bicubic = PillowFilter::Bicubic;
    assert_eq!(
        resize_rgb8(&rgb[1..], [4, 6], [2, 2], bicubic),
        Err(PillowResizeError::BufferLength {
            height: 4,
            width: 6,
            expected: 72,
            actual: 71
        })
    );
    for (input, output) in [
        ([0, 6], [2, 2]),
        ([4, 0], [2, 2]),
        ([4, 6], [0, 2]),
        ([4, 6], [2, 0]),
    ] {
        assert_eq!(
            resize_rgb8(&rgb, input, output, bicubic),
            Err(PillowResizeError::ZeroSize { input, output })
        );
    }
    let huge = [1, 1usize << 31];
    assert_eq!(
        resize_rgb8(&rgb, [4, 6], huge, bicubic),
        Err(PillowResizeError::TooLarge {
            input: [4, 6],
            output: huge
        })
    );
    let overflowing = [usize::MAX / 2, 3];
    assert!(matches!(
        resize_rgb8(&rgb, overflowing, [2, 2], bicubic),
        Err(PillowResizeError::TooLarge { .. })
    ));
    let message = resize_rgb8(&rgb[1..], [4, 6], [2, 2], bicubic)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("71 bytes") && message.contains("4x6"),
        "{message}"
    );
}

#[test]
fn pillow_resize_pass_order_follows_pillow_13() {
    // Measured on Pillow 13.0.0 (the fixture's `square_50x50` and portrait cases pin it).
    assert!(!vertical_pass_first([50, 50], [2, 26])); // 48 > 2 * 24 is false: a tie
    assert!(vertical_pass_first([50, 50], [2, 27]));
    assert!(vertical_pass_first([1920, 1080], [1024, 1024])); // a portrait video frame
    assert!(!vertical_pass_first([1080, 1920], [1024, 1024]));
    assert!(vertical_pass_first([300, 200], [256, 256])); // the width grows
    assert!(!vertical_pass_first([40, 40], [80, 10])); // the height grows
    assert!(!vertical_pass_first([50, 50], [2, 50])); // one pass only
}

//! Shared helpers of the SAM 2.1 (Hiera) parity tests: the reduced fixture model and checked
//! comparisons, against whole tensors or against the strided samples and whole-tensor
//! statistics that `scripts/fixtures/sam2_hiera.py` stores for large ones
//! (`sample.<key>`, `index.<key>`, `shape.<key>`, `stats.<key>` = [sum, sum of squares, max |x|]).
#![allow(dead_code)]

use burn::tensor::{backend::Backend, DType, Tensor};
use segburn_models::fixtures::{
    fixture_path, max_abs, max_abs_diff, rel_l2, tensor_values, Fixture,
};
use segburn_models::sam2::{import, PromptSet, Sam2, Sam2Config};
use segburn_models::weights::cast_floats;

pub fn fixture(name: &str) -> Fixture {
    Fixture::load(&format!("sam2_hiera/{name}"))
        .unwrap_or_else(|e| panic!("fixture sam2_hiera/{name}: {e}"))
}

/// The reduced SAM 2.1 model of the fixtures (`reference/sam2-hiera-spec.md` §8).
pub fn reduced_config() -> Sam2Config {
    segburn_models::fixtures::sam2_hiera_config()
}

/// The reduced model's weights: the formula weights of `sam2_hiera/model.keys.txt`.
pub fn model_path() -> std::path::PathBuf {
    fixture_path("sam2_hiera/model.safetensors").unwrap_or_else(|e| panic!("{e}"))
}

/// The reduced model with the fixture weights (loaded strictly), in `dtype`.
pub fn load_model<B: Backend>(device: &B::Device, dtype: DType) -> Sam2<B> {
    let config = reduced_config();
    config.check().expect("the reduced config is valid");
    let path = model_path();
    let (model, report) = import::load_official(config.init::<B>(device), &path, true)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        report.missing.is_empty() && report.unexpected.is_empty(),
        "{report}"
    );
    cast_floats(model, dtype)
}

/// `pipeline.safetensors:image_u8`, the 240×320 RGB image of the predictor fixtures.
pub fn image_bytes(f: &Fixture) -> Vec<u8> {
    let data = f.data("image_u8").expect("image_u8");
    assert_eq!(data.shape.to_vec(), [240, 320, 3]);
    data.as_bytes().to_vec()
}

/// The prompt sets of a `pipeline.safetensors` case, from its original-pixel clicks
/// (`<case>.point_coords_orig` [sets, points, 2], `<case>.point_labels`) and box
/// (`<case>.box_orig` [sets, 4]); a case with neither (a mask alone) is one empty set.
pub fn prompt_sets(f: &Fixture, case: &str) -> Vec<PromptSet> {
    let as_f32 = |key: String| -> Vec<f32> { values(f, &key).iter().map(|&v| v as f32).collect() };
    let points = f.data(&format!("{case}.point_coords_orig")).ok();
    let boxes = f.data(&format!("{case}.box_orig")).ok();
    let sets = points
        .as_ref()
        .or(boxes.as_ref())
        .map_or(1, |data| data.shape[0]);
    let coords = points.map(|_| as_f32(format!("{case}.point_coords_orig")));
    let labels = coords
        .as_ref()
        .map(|_| values(f, &format!("{case}.point_labels")));
    let boxes = boxes.map(|_| as_f32(format!("{case}.box_orig")));
    (0..sets)
        .map(|s| {
            let mut set = PromptSet::default();
            if let (Some(coords), Some(labels)) = (&coords, &labels) {
                let per_set = labels.len() / sets;
                for p in 0..per_set {
                    let i = s * per_set + p;
                    set.points.push([coords[2 * i], coords[2 * i + 1]]);
                    set.labels.push(labels[i] as i64);
                }
            }
            if let Some(boxes) = &boxes {
                set.bbox = Some([
                    boxes[4 * s],
                    boxes[4 * s + 1],
                    boxes[4 * s + 2],
                    boxes[4 * s + 3],
                ]);
            }
            set
        })
        .collect()
}

/// A fixture tensor in `dtype`.
pub fn input<B: Backend, const D: usize>(
    f: &Fixture,
    key: &str,
    device: &B::Device,
    dtype: DType,
) -> Tensor<B, D> {
    let t: Tensor<B, D> = f.float_f64(key, device).unwrap_or_else(|e| panic!("{e}"));
    t.cast(dtype)
}

fn values(f: &Fixture, key: &str) -> Vec<f64> {
    f.values_f64(key).unwrap_or_else(|e| panic!("{e}"))
}

/// Whether `key` is stored whole (else as a sample).
fn is_whole(f: &Fixture, key: &str) -> bool {
    f.tensors().contains_key(key)
}

/// A stored sample of `key`: (flat indices, values, shape, [sum, sum of squares, max |x|]).
pub struct Sampled {
    pub index: Vec<usize>,
    pub values: Vec<f64>,
    pub shape: Vec<usize>,
    pub stats: [f64; 3],
}

pub fn sampled(f: &Fixture, key: &str) -> Sampled {
    let stats = values(f, &format!("stats.{key}"));
    Sampled {
        index: values(f, &format!("index.{key}"))
            .iter()
            .map(|&i| i as usize)
            .collect(),
        values: values(f, &format!("sample.{key}")),
        shape: values(f, &format!("shape.{key}"))
            .iter()
            .map(|&d| d as usize)
            .collect(),
        stats: [stats[0], stats[1], stats[2]],
    }
}

/// Max |reference| of a fixture key, stored whole or sampled (then over the whole tensor).
pub fn reference_max_abs(f: &Fixture, key: &str) -> f64 {
    if is_whole(f, key) {
        max_abs(&values(f, key))
    } else {
        sampled(f, key).stats[2]
    }
}

/// Max |ours − reference| of a sampled key: over the sample, and the differences of the mean,
/// the root mean square and the max |x| of the whole tensors. Each is at most the whole
/// tensor's max |ours − reference|, so one tolerance bounds them all.
pub fn sampled_error(ours: &[f64], reference: &Sampled) -> f64 {
    let picked: Vec<f64> = reference.index.iter().map(|&i| ours[i]).collect();
    let n = ours.len() as f64;
    let sum: f64 = ours.iter().sum();
    let sumsq: f64 = ours.iter().map(|v| v * v).sum();
    let [ref_sum, ref_sumsq, ref_max] = reference.stats;
    [
        max_abs_diff(&picked, &reference.values),
        (sum - ref_sum).abs() / n,
        ((sumsq / n).sqrt() - (ref_sumsq / n).sqrt()).abs(),
        (max_abs(ours) - ref_max).abs(),
    ]
    .into_iter()
    .fold(
        0.0,
        |m, e| if e.is_nan() { f64::INFINITY } else { m.max(e) },
    )
}

/// Max |ours − reference| and that over max |reference| against a fixture key stored whole or
/// sampled (shapes checked; any non-finite value of ours is a failure).
pub fn errors<B: Backend, const D: usize>(
    ours: Tensor<B, D>,
    f: &Fixture,
    key: &str,
) -> (f64, f64) {
    let shape = ours.dims().to_vec();
    let ours = tensor_values(ours);
    assert!(
        ours.iter().all(|v| v.is_finite()),
        "`{key}`: non-finite values"
    );
    let (error, scale, reference_shape) = if is_whole(f, key) {
        let reference = values(f, key);
        let shape = f.data(key).expect(key).shape.to_vec();
        // NaN or infinity on either side is an infinite error.
        (max_abs_diff(&ours, &reference), max_abs(&reference), shape)
    } else {
        let reference = sampled(f, key);
        (
            sampled_error(&ours, &reference),
            reference.stats[2],
            reference.shape,
        )
    };
    assert_eq!(
        shape,
        reference_shape,
        "shape of `{key}` in {}",
        f.path().display()
    );
    (error, error / scale.max(f64::MIN_POSITIVE))
}

/// Asserts max |ours − reference| ≤ `atol`, printing the error.
pub fn assert_close<B: Backend, const D: usize>(
    ours: Tensor<B, D>,
    f: &Fixture,
    key: &str,
    atol: f64,
) {
    let (abs, rel) = errors(ours, f, key);
    println!("{key}: max abs {abs:.3e} (relative to max |ref| {rel:.3e}), atol {atol:.0e}");
    assert!(abs <= atol, "{key}: max abs error {abs:.3e} > {atol:.0e}");
}

/// Asserts max |ours − reference| ≤ `tol · max(1, max |reference|)`: `tol` absolute for
/// references within ±1, relative to the largest value above (the formula weights give
/// activations up to ~30).
pub fn assert_close_scaled<B: Backend, const D: usize>(
    ours: Tensor<B, D>,
    f: &Fixture,
    key: &str,
    tol: f64,
) {
    let (abs, rel) = errors(ours, f, key);
    let scale = if rel > 0.0 { abs / rel } else { 1.0 };
    let bound = tol * scale.max(1.0);
    println!(
        "{key}: max abs {abs:.3e} of max |ref| {scale:.3}, relative {rel:.3e}; \
         bound {bound:.3e} ({tol:.0e} per unit)"
    );
    assert!(abs <= bound, "{key}: max abs error {abs:.3e} > {bound:.3e}");
}

/// Asserts max |ours − reference| / max |reference| ≤ `rtol`, printing the error.
pub fn assert_close_relative<B: Backend, const D: usize>(
    ours: Tensor<B, D>,
    f: &Fixture,
    key: &str,
    rtol: f64,
) {
    let (abs, rel) = errors(ours, f, key);
    println!("{key}: max abs {abs:.3e}, relative {rel:.3e}, rtol {rtol:.0e}");
    assert!(rel <= rtol, "{key}: relative error {rel:.3e} > {rtol:.0e}");
}

/// Relative L2 error of `ours` (the whole tensor, flattened) against a key stored whole or
/// sampled. For a sample: the larger of the sample's relative L2 error and the relative
/// difference of the whole tensors' norms (both at most the whole relative L2 error).
pub fn rel_l2_error(ours: &[f64], f: &Fixture, key: &str) -> f64 {
    assert!(ours.iter().all(|v| v.is_finite()), "{key}: non-finite");
    if is_whole(f, key) {
        return rel_l2(ours, &values(f, key));
    }
    let reference = sampled(f, key);
    assert_eq!(
        ours.len(),
        reference.shape.iter().product::<usize>(),
        "{key}: size"
    );
    let picked: Vec<f64> = reference.index.iter().map(|&i| ours[i]).collect();
    let norm = ours.iter().map(|v| v * v).sum::<f64>().sqrt();
    let ref_norm = reference.stats[1].sqrt();
    rel_l2(&picked, &reference.values).max((norm - ref_norm).abs() / ref_norm)
}

/// The names stored under `prefix.` (whole or sampled), e.g. the gradient keys of
/// `train_step.safetensors`.
pub fn stored_names(f: &Fixture, prefix: &str) -> Vec<String> {
    let whole = format!("{prefix}.");
    let sample = format!("sample.{prefix}.");
    let mut names: Vec<String> = f
        .tensors()
        .keys()
        .filter_map(|k| {
            k.strip_prefix(&whole)
                .or_else(|| k.strip_prefix(&sample))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// `key → shape` of an official key listing.
pub fn listing(path: &std::path::Path) -> std::collections::BTreeMap<String, Vec<usize>> {
    segburn_models::fixtures::key_listing(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The predictor of `model` on the fixtures' preprocessed image (`encoder.safetensors:image`,
/// bitwise the official transforms, f32) cast to `dtype`: how the pure-f64 reference ran, so
/// ours differs from it only by f32 rounding of the image (≤ 6e-7). The photo is 240×320.
pub fn predictor_on_the_reference_image<'m, B: Backend>(
    model: &'m Sam2<B>,
    device: &B::Device,
    dtype: DType,
) -> segburn_models::sam2::Sam2ImagePredictor<'m, B> {
    let image: Tensor<B, 4> = input(&fixture("encoder.safetensors"), "image", device, dtype);
    segburn_models::sam2::Sam2ImagePredictor::from_input(model, image, [240, 320]).expect("encoder")
}

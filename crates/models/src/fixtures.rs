//! Locating and reading the reference fixtures made with the official PyTorch code.
//!
//! The fixtures live outside the repository (`../shared/fixtures` next to the checkout). Set
//! `SEGBURN_FIXTURES` to point elsewhere. Parity tests go through [`Fixture`] so that a missing
//! file or key is reported with its path rather than as a bare panic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{backend::Backend, DType, Tensor, TensorData};

use crate::sam2::{
    EncoderConfig, HieraConfig, HieraImageEncoderConfig, MaskDecoderConfig, PromptEncoderConfig,
    Sam2Config, TwoWayTransformerConfig,
};
use crate::tensor_file::{read_safetensors, NamedTensors, TensorFileError};
use crate::weights::PathSegment;

/// The fixtures directory: `$SEGBURN_FIXTURES`, else `<workspace>/../shared/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SEGBURN_FIXTURES") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("..")
        .join("shared")
        .join("fixtures")
}

/// The reference texts next to the fixtures (`../shared/reference`): official key lists.
pub fn reference_dir() -> PathBuf {
    fixtures_dir().join("..").join("reference")
}

/// `key → shape` of an official key listing (`key<TAB>[shape]<TAB>dtype` per line; `#` lines
/// are comments), as `state_dict_keys.txt` and `reference/state_dict_*.txt` are written.
pub fn key_listing(path: &Path) -> std::io::Result<BTreeMap<String, Vec<usize>>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| {
            let mut fields = line.split('\t');
            let key = fields.next().unwrap_or_default().to_string();
            let shape = fields
                .next()
                .unwrap_or_default()
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .filter_map(|d| d.trim().parse().ok())
                .collect();
            (key, shape)
        })
        .collect())
}

/// The reduced SAM 2.1 model of the `sam2_hiera` fixtures (`reference/sam2-hiera-spec.md` §8):
/// Hiera with embed_dim 32, 1 head, stages [1,2,3,1], global block 5; neck and heads at
/// d = 64; 256×256 input. Its weights are `sam2_hiera/model.safetensors`.
pub fn sam2_hiera_config() -> Sam2Config {
    let trunk = HieraConfig::new()
        .with_embed_dim(32)
        .with_num_heads(1)
        .with_stages(vec![1, 2, 3, 1])
        .with_global_att_blocks(vec![5])
        .with_window_spec(vec![8, 4, 14, 7])
        .with_window_pos_embed_bkg_spatial_size([7, 7]);
    let d = 64;
    Sam2Config::new(
        PromptEncoderConfig::new([16, 16], [256, 256]).with_embed_dim(d),
        MaskDecoderConfig::new()
            .with_transformer_dim(d)
            .with_transformer(TwoWayTransformerConfig::new().with_embedding_dim(d))
            .with_dynamic_multimask_via_stability(true),
    )
    .with_image_encoder(Some(EncoderConfig::Hiera(
        HieraImageEncoderConfig::with_d_model(trunk, d),
    )))
}

/// One fixture file, loaded whole.
pub struct Fixture {
    path: PathBuf,
    tensors: NamedTensors,
}

impl Fixture {
    /// Loads `<fixtures>/<relative>`, e.g. `Fixture::load("pidnet_s/outputs.safetensors")`.
    pub fn load(relative: &str) -> Result<Self, TensorFileError> {
        let mut path = fixtures_dir();
        for part in relative.split('/') {
            path.push(part);
        }
        let tensors = read_safetensors(&path)?;
        Ok(Self { path, tensors })
    }

    /// The file this fixture was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// All tensors, by key.
    pub fn tensors(&self) -> &NamedTensors {
        &self.tensors
    }

    /// The raw data of one key.
    pub fn data(&self, key: &str) -> Result<TensorData, TensorFileError> {
        self.tensors
            .get(key)
            .cloned()
            .ok_or_else(|| TensorFileError::MissingKey {
                path: self.path.clone(),
                key: key.to_string(),
            })
    }

    /// One key as an f32 tensor on `device` (f64 and integer data are converted).
    pub fn float<B: Backend, const D: usize>(
        &self,
        key: &str,
        device: &B::Device,
    ) -> Result<Tensor<B, D>, TensorFileError> {
        let data = self.data(key)?.convert::<f32>();
        Ok(Tensor::from_data(data, device))
    }

    /// One key as an f64 tensor on `device` (for reference runs in double precision).
    pub fn float_f64<B: Backend, const D: usize>(
        &self,
        key: &str,
        device: &B::Device,
    ) -> Result<Tensor<B, D>, TensorFileError> {
        let data = self.data(key)?.convert::<f64>();
        Ok(Tensor::from_data(data, (device, burn::tensor::DType::F64)))
    }

    /// One key as values in f64 (handy for comparisons).
    pub fn values_f64(&self, key: &str) -> Result<Vec<f64>, TensorFileError> {
        let data = self.data(key)?.convert::<f64>();
        Ok(data.to_vec::<f64>().unwrap_or_default())
    }
}

/// Maximum absolute difference between two equally long slices. A NaN or an infinity on either
/// side is an infinite error: `f64::max` drops NaN, so a plain fold would let a model that
/// outputs NaN pass every tolerance.
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "compared tensors differ in length");
    a.iter()
        .zip(b)
        .map(|(x, y)| finite_or_infinite((x - y).abs(), [*x, *y]))
        .fold(0.0, f64::max)
}

/// The largest absolute value (the scale an error is judged against); infinite when a value is
/// NaN or infinite, for the same reason as [`max_abs_diff`].
pub fn max_abs(values: &[f64]) -> f64 {
    values
        .iter()
        .map(|v| finite_or_infinite(v.abs(), [*v]))
        .fold(0.0, f64::max)
}

/// `measure`, or infinity when any of `inputs` (or `measure` itself) is not finite.
fn finite_or_infinite<const N: usize>(measure: f64, inputs: [f64; N]) -> f64 {
    if measure.is_finite() && inputs.iter().all(|v| v.is_finite()) {
        measure
    } else {
        f64::INFINITY
    }
}

/// Relative L2 error `‖a − b‖ / ‖b‖` (b is the reference).
pub fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "compared tensors differ in length");
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// Values of a tensor in f64.
pub fn tensor_values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f64> {
    t.into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .unwrap_or_default()
}

/// The gradients (in f64) of the parameters of `model` whose key `key_of(path)` is in `keys`,
/// by key. A wanted parameter without a gradient, or a key no parameter has, is absent from the
/// result, so callers compare its length with `keys`.
pub fn gradients_by_key<B: AutodiffBackend, M: Module<B>>(
    model: &M,
    grads: &B::Gradients,
    keys: &[String],
    key_of: fn(&[PathSegment]) -> String,
) -> BTreeMap<String, Vec<f64>> {
    let mut visitor = GradientsByKey::<B> {
        path: Vec::new(),
        grads,
        key_of,
        wanted: keys.iter().cloned().collect(),
        found: BTreeMap::new(),
    };
    model.visit(&mut visitor);
    visitor.found
}

struct GradientsByKey<'a, B: AutodiffBackend> {
    path: Vec<PathSegment>,
    grads: &'a B::Gradients,
    key_of: fn(&[PathSegment]) -> String,
    wanted: BTreeSet<String>,
    found: BTreeMap<String, Vec<f64>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for GradientsByKey<'_, B> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.push(PathSegment::new(name, container_type));
    }
    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let key = (self.key_of)(&self.path);
        if self.wanted.contains(&key) {
            if let Some(grad) = param.val().grad(self.grads) {
                self.found.insert(key, tensor_values(grad));
            }
        }
    }
}

/// `module` with every float tensor (parameters and running statistics) cast to `dtype`, e.g.
/// to run a model in f64 against the f64 references.
pub fn cast_module<B: Backend, M: Module<B>>(module: M, dtype: DType) -> M {
    module.map(&mut CastFloats(dtype))
}

struct CastFloats(DType);

impl<B: Backend> ModuleMapper<B> for CastFloats {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let id = param.id;
        let value = param.val().cast(self.0).detach();
        param.transform_for_load(value, id)
    }
}

#[cfg(test)]
mod comparison_tests {
    use super::*;

    #[test]
    fn a_nan_or_an_infinity_is_an_infinite_error() {
        let reference = [0.5, -1.0, 2.0];
        assert_eq!(max_abs_diff(&[0.5, -1.0, 2.25], &reference), 0.25);
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for position in 0..3 {
                let mut output = reference;
                output[position] = bad;
                let error = max_abs_diff(&output, &reference);
                assert_eq!(error, f64::INFINITY, "{bad} at {position}");
                assert!(error > 1e-3, "a tolerance check must fail");
                // Also when the reference holds it (a broken fixture is no pass either).
                assert_eq!(max_abs_diff(&reference, &output), f64::INFINITY);
            }
        }
        assert_eq!(max_abs(&[1.0, -3.0]), 3.0);
        assert_eq!(max_abs(&[1.0, f64::NAN]), f64::INFINITY);
    }
}

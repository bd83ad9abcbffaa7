//! Official PyTorch weights in and out: reading `.pt` / `.safetensors` files, matching their keys to
//! our module paths, and writing our modules back out under the official key names.
//!
//! A model provides one function, `key_of(path) -> official_key`, that maps the path Burn derives
//! from our field names to the official key. Each [`PathSegment`] carries the field name and the
//! type of the struct that owns the field, so a rule can say "field `conv` of a `ConvBn` is
//! PyTorch's `0`" without a key table. When field names already are the official names,
//! [`dotted_path`] is the whole rule. Everything else is generic.

mod apply;
mod export;
mod read;
mod report;
mod shapes;

pub use apply::{load_named, LoadOptions};
pub use export::export_named;
pub use read::{read_tensor_file, strip_prefixes};
pub use report::LoadReport;
pub use shapes::named_shapes;

use std::path::PathBuf;

use crate::tensor_file::TensorFileError;

/// Why weights could not be read or applied.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error(transparent)]
    File(#[from] TensorFileError),
    #[error(
        "cannot read PyTorch file {path}: {message} (is it truncated or not a torch.save file?)"
    )]
    Pytorch { path: PathBuf, message: String },
    #[error("{path} holds no tensors")]
    Empty { path: PathBuf },
    #[error("strict load from {source_name} failed:\n{report}")]
    Strict {
        source_name: String,
        report: Box<LoadReport>,
    },
}

/// One step of a module path: a field (or Vec index) and the container that holds it, as Burn
/// reports it (`"Struct:ConvBn"`, `"Vec"`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSegment {
    pub name: String,
    pub parent: String,
}

impl PathSegment {
    pub fn new(name: &str, parent: &str) -> Self {
        Self {
            name: name.to_string(),
            parent: parent.to_string(),
        }
    }

    /// The parent struct's name, without the `Struct:` tag.
    pub fn parent_struct(&self) -> Option<&str> {
        self.parent.strip_prefix("Struct:")
    }
}

/// The path as Burn names it: field names and indices joined by dots. Enum variants (Burn adds
/// one segment per variant, e.g. SAM2's `image_encoder.Hiera.trunk`) are left out: a variant
/// chooses a module, it is not a level of the official key.
pub fn dotted_path(path: &[PathSegment]) -> String {
    let names: Vec<&str> = path
        .iter()
        .filter(|s| !s.parent.starts_with("Enum:"))
        .map(|s| s.name.as_str())
        .collect();
    names.join(".")
}

/// Keys of running statistics and counters: buffers, not trained parameters.
pub fn is_buffer_key(key: &str) -> bool {
    matches!(
        key.rsplit('.').next(),
        Some("running_mean" | "running_var" | "num_batches_tracked")
    )
}

/// Every float tensor of `module` (parameters and buffers) cast to `dtype`, e.g. an f64 copy of
/// a model for a reference run. Ids are kept, so optimizer state and gradients still match.
pub fn cast_floats<B: burn::tensor::backend::Backend, M: burn::module::Module<B>>(
    module: M,
    dtype: burn::tensor::DType,
) -> M {
    struct CastFloats(burn::tensor::DType);
    impl<B: burn::tensor::backend::Backend> burn::module::ModuleMapper<B> for CastFloats {
        fn map_float<const D: usize>(
            &mut self,
            param: burn::module::Param<burn::tensor::Tensor<B, D>>,
        ) -> burn::module::Param<burn::tensor::Tensor<B, D>> {
            let id = param.id;
            let value = param.val().cast(self.0).detach();
            param.transform_for_load(value, id)
        }
    }
    module.map(&mut CastFloats(dtype))
}

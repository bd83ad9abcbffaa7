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
mod param_path;
mod read;
mod report;
mod shapes;

pub use apply::{load_named, LoadOptions};
pub use export::export_named;
pub use param_path::{dotted_path, ParamPath, PathSegment};
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

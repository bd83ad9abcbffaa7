//! Applying named tensors to a module through Burn's `ModuleMapper`, which tells us the path of
//! every parameter as it walks the module tree.

use std::collections::BTreeSet;

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{backend::Backend, Tensor};

use super::{LoadReport, ParamPath, PathSegment, WeightsError};
use crate::tensor_file::NamedTensors;

/// How strictly a file must match the model.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Fail unless every key matches (no missing, unexpected or mis-shaped keys).
    pub strict: bool,
    /// File keys to ignore silently (prefixes), e.g. `sem_loss.` in official Cityscapes files.
    pub ignore_prefixes: Vec<String>,
    /// Names the source in errors (usually the file path).
    pub source_name: String,
}

impl LoadOptions {
    pub fn strict(source_name: impl Into<String>) -> Self {
        Self {
            strict: true,
            ignore_prefixes: Vec::new(),
            source_name: source_name.into(),
        }
    }

    pub fn partial(source_name: impl Into<String>) -> Self {
        Self {
            strict: false,
            ..Self::strict(source_name)
        }
    }

    pub fn ignoring(mut self, prefixes: &[&str]) -> Self {
        self.ignore_prefixes
            .extend(prefixes.iter().map(|p| p.to_string()));
        self
    }
}

struct Applier<'a> {
    path: ParamPath,
    tensors: &'a NamedTensors,
    key_of: &'a dyn Fn(&[PathSegment]) -> String,
    report: LoadReport,
    used: BTreeSet<String>,
}

impl<B: Backend> ModuleMapper<B> for Applier<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let key = (self.key_of)(self.path.segments());
        let Some(data) = self.tensors.get(&key) else {
            self.report.missing.push(key);
            return param;
        };
        self.used.insert(key.clone());
        let model_shape = param.lazy_shape().to_vec();
        let file_shape = data.shape.to_vec();
        // PyTorch stores counters such as `num_batches_tracked` as 0-d scalars; ours are [1].
        let same_count =
            file_shape.iter().product::<usize>() == model_shape.iter().product::<usize>();
        let shapes_match = file_shape == model_shape || (file_shape.is_empty() && same_count);
        if !shapes_match {
            self.report
                .shape_mismatched
                .push((key, file_shape, model_shape));
            return param;
        }
        let device = param.lazy_device();
        let id = param.id;
        let mut data = data.clone().convert::<f32>();
        data.shape = param.lazy_shape();
        let value = Tensor::<B, D>::from_data(data, &device);
        self.report.loaded.push(key);
        param.transform_for_load(value, id)
    }
}

/// Loads `tensors` (keyed by official names) into `module`.
///
/// `key_of` maps our module path to the official key ([`super::dotted_path`] when the field
/// names already are the official names). In strict mode any missing,
/// unexpected or mis-shaped key is an error carrying the full report; otherwise the report says
/// what was skipped and the module keeps its initial values there.
pub fn load_named<B: Backend, M: Module<B>>(
    module: M,
    tensors: &NamedTensors,
    key_of: &dyn Fn(&[PathSegment]) -> String,
    options: &LoadOptions,
) -> Result<(M, LoadReport), WeightsError> {
    let mut applier = Applier {
        path: ParamPath::new(),
        tensors,
        key_of,
        report: LoadReport::default(),
        used: BTreeSet::new(),
    };
    let module = module.map(&mut applier);
    let mut report = applier.report;
    report.unexpected = tensors
        .keys()
        .filter(|k| !applier.used.contains(*k))
        .filter(|k| !options.ignore_prefixes.iter().any(|p| k.starts_with(p)))
        .cloned()
        .collect();
    if options.strict && !report.is_exact() {
        return Err(WeightsError::Strict {
            source_name: options.source_name.clone(),
            report: Box::new(report),
        });
    }
    Ok((module, report))
}

//! Writing a module's tensors out under the official key names.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{backend::Backend, Tensor, TensorData};

use super::{ParamPath, PathSegment};
use crate::tensor_file::NamedTensors;

struct Collector<'a> {
    path: ParamPath,
    key_of: &'a dyn Fn(&[PathSegment]) -> String,
    out: NamedTensors,
}

impl<B: Backend> ModuleVisitor<B> for Collector<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let key = (self.key_of)(self.path.segments());
        let data = param.val().into_data().convert::<f32>();
        // PyTorch keeps BatchNorm's counter as an int64 scalar; write it the same way so the
        // file loads with `load_state_dict(strict=True)`.
        let data = if key.ends_with("num_batches_tracked") {
            let count = data.iter::<f32>().next().unwrap_or(0.0) as i64;
            TensorData::new(vec![count], Vec::<usize>::new())
        } else {
            data
        };
        self.out.insert(key, data);
    }
}

/// Every tensor of `module` (parameters and buffers), keyed by official names, in f32.
pub fn export_named<B: Backend, M: Module<B>>(
    module: &M,
    key_of: &dyn Fn(&[PathSegment]) -> String,
) -> NamedTensors {
    let mut collector = Collector {
        path: ParamPath::new(),
        key_of,
        out: NamedTensors::new(),
    };
    module.visit(&mut collector);
    collector.out
}

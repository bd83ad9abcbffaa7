//! The official key and shape of every tensor of a module, without materialising it: lazily
//! initialised parameters report the shape they will have, so even SAM 2.1-L's 224 M values are
//! listed without allocating them.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{backend::Backend, Tensor};

use super::{ParamPath, PathSegment};

struct ShapeCollector<'a> {
    path: ParamPath,
    key_of: &'a dyn Fn(&[PathSegment]) -> String,
    out: Vec<(String, Vec<usize>)>,
}

impl<B: Backend> ModuleVisitor<B> for ShapeCollector<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let key = (self.key_of)(self.path.segments());
        self.out.push((key, param.lazy_shape().to_vec()));
    }
}

/// `(official key, shape)` of every float tensor of `module` (parameters and buffers), in
/// module order.
pub fn named_shapes<B: Backend, M: Module<B>>(
    module: &M,
    key_of: &dyn Fn(&[PathSegment]) -> String,
) -> Vec<(String, Vec<usize>)> {
    let mut collector = ShapeCollector {
        path: ParamPath::new(),
        key_of,
        out: Vec::new(),
    };
    module.visit(&mut collector);
    collector.out
}

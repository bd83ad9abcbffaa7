//! The trainable parameters of a module: their official key, Burn id, rank and kind.

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::{backend::Backend, Tensor};
use segburn_models::weights::{is_buffer_key, ParamPath, PathSegment};

/// One trainable parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamInfo {
    /// The official key (`layer1.0.bn1.weight`).
    pub key: String,
    pub id: ParamId,
    pub rank: usize,
    /// The weight or bias of a normalisation layer.
    pub is_norm: bool,
    /// A bias (of any layer).
    pub is_bias: bool,
}

struct Lister<'a> {
    path: ParamPath,
    key_of: &'a dyn Fn(&[PathSegment]) -> String,
    out: Vec<ParamInfo>,
}

impl<B: Backend> ModuleVisitor<B> for Lister<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let key = (self.key_of)(self.path.segments());
        if is_buffer_key(&key) {
            return;
        }
        let owner = self
            .path
            .last()
            .and_then(|s| s.parent_struct())
            .unwrap_or_default();
        self.out.push(ParamInfo {
            is_norm: owner.contains("Norm"),
            is_bias: key.ends_with("bias"),
            key,
            id: param.id,
            rank: D,
        });
    }
}

/// Lists the trainable parameters of `module` (running statistics excluded), in module order.
pub fn list_params<B: Backend, M: Module<B>>(
    module: &M,
    key_of: &dyn Fn(&[PathSegment]) -> String,
) -> Vec<ParamInfo> {
    let mut lister = Lister {
        path: ParamPath::new(),
        key_of,
        out: Vec::new(),
    };
    module.visit(&mut lister);
    lister.out
}

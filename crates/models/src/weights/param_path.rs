//! Module paths as Burn's visitors and mappers walk a module: each step is a field (or index)
//! and the container that holds it, kept on a stack by [`ParamPath`] from the
//! `enter_module` / `exit_module` calls, so that at a parameter the stack is its path.

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

/// The path of the module a `ModuleVisitor` or `ModuleMapper` is in: call [`Self::enter`] from
/// `enter_module` and [`Self::exit`] from `exit_module`; in `visit_float` / `map_float` the
/// path is the parameter's (a model's `key_of` reads [`Self::segments`]).
#[derive(Debug, Clone, Default)]
pub struct ParamPath {
    segments: Vec<PathSegment>,
}

impl ParamPath {
    /// The empty path (the root module).
    pub fn new() -> Self {
        Self::default()
    }

    /// Steps into field `name` of a `container_type` (`enter_module`'s arguments).
    pub fn enter(&mut self, name: &str, container_type: &str) {
        self.segments.push(PathSegment::new(name, container_type));
    }

    /// Steps back out (`exit_module`).
    pub fn exit(&mut self) {
        self.segments.pop();
    }

    /// The steps, outermost first.
    pub fn segments(&self) -> &[PathSegment] {
        &self.segments
    }

    /// The innermost step: at a parameter, its field and the container that owns it.
    pub fn last(&self) -> Option<&PathSegment> {
        self.segments.last()
    }

    /// [`dotted_path`] of the current path.
    pub fn dotted(&self) -> String {
        dotted_path(&self.segments)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_follows_enter_and_exit_and_skips_enum_variants() {
        let mut path = ParamPath::new();
        path.enter("image_encoder", "Struct:Sam2");
        path.enter("Hiera", "Enum:Sam2ImageEncoder");
        path.enter("trunk", "Struct:HieraImageEncoder");
        path.enter("blocks", "Struct:Hiera");
        path.enter("3", "Vec");
        assert_eq!(path.dotted(), "image_encoder.trunk.blocks.3");
        path.exit();
        path.enter("4", "Vec");
        assert_eq!(path.dotted(), "image_encoder.trunk.blocks.4");
        assert_eq!(path.last(), Some(&PathSegment::new("4", "Vec")));
        assert_eq!(path.segments().len(), 5);
        for _ in 0..5 {
            path.exit();
        }
        assert_eq!(path.dotted(), "");
        assert_eq!(path.last(), None);
    }
}

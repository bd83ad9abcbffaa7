//! Our module paths → official `state_dict` keys.
//!
//! Field names already are the official names except where PyTorch uses `nn.Sequential`
//! indices; those containers are our small structs, and the rule below gives each field its
//! index. Enum variants (the S/M vs L choice of `spp`, `dfm`, `layer4_d`) add no segment.

use crate::weights::PathSegment;

/// Keys an official checkpoint may carry that belong to the loss, not the model.
pub const PIDNET_IGNORED_PREFIXES: &[&str] = &["sem_loss.", "bd_loss."];

/// The official key of one of our parameters.
pub fn official_key(path: &[PathSegment]) -> String {
    let names: Vec<&str> = path
        .iter()
        .filter(|segment| !segment.parent.starts_with("Enum:"))
        .map(
            |segment| match (segment.parent_struct(), segment.name.as_str()) {
                (Some("ConvBn"), "conv") => "0",
                (Some("ConvBn"), "bn") => "1",
                (Some("PreActConv"), "bn") => "0",
                (Some("PreActConv"), "conv") => "2",
                // Index 0 of these Sequentials is the (parameter-free) pooling layer.
                (Some("PooledBranch"), "bn") => "1",
                (Some("PooledBranch"), "conv") => "3",
                (Some("Stem"), "conv1") => "0",
                (Some("Stem"), "bn1") => "1",
                (Some("Stem"), "conv2") => "3",
                (Some("Stem"), "bn2") => "4",
                (_, name) => name,
            },
        )
        .collect();
    names.join(".")
}

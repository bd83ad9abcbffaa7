//! Optimizers with PyTorch's semantics, built on Burn's.

mod sgd;

pub use sgd::SgdSettings;

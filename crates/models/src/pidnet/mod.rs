//! PIDNet-S/M/L, matching the official PyTorch model (`XuJiacong/PIDNet`, `models/pidnet.py`)
//! parameter for parameter, so that official checkpoints load.

mod config;
mod fusion;
mod import;
mod keys;
mod model;
mod pag;
mod pyramid_pooling;
mod residual;
mod segment_head;
mod stem;

pub use config::{PidNetConfig, PidNetPreset, PidNetSize};
pub use import::{
    checkpoint_num_classes, load_pidnet, load_pidnet_tensors, pidnet_state_dict,
    read_pidnet_tensors, save_pidnet_safetensors, LoadMode, PidNetImportError,
};
pub use keys::{official_key, PIDNET_IGNORED_PREFIXES};
pub use model::{DetailStage, PidNet, PidNetError, PidNetOutput, Tap};

//! The small training set-up the end-to-end tests share: the 12 sample validation images as a
//! training split, 64×64 crops in batches of 2 (6 micro-batches per epoch), PIDNet-S, and no
//! validation. Each test adjusts the `train` section.

use std::path::{Path, PathBuf};

use segburn_data::{DataConfig, Layout};
use segburn_models::pidnet::{PidNetConfig, PidNetSize};
use segburn_train::loss::{OhemConfig, PidNetLossConfig};
use segburn_train::pidnet::{PidNetSetup, PidNetTrainConfig};

pub fn sample_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("datasets")
        .join("sample")
}

/// The shared set-up writing to `run_dir`, with `configure` applied to its `train` section.
pub fn tiny_setup(run_dir: &Path, configure: impl FnOnce(&mut PidNetTrainConfig)) -> PidNetSetup {
    let mut data = DataConfig {
        layout: Layout::Cityscapes {
            root: sample_root(),
        },
        train_split: "val".into(),
        ..DataConfig::default()
    };
    data.augment.base_size = 128;
    data.augment.crop_height = 64;
    data.augment.crop_width = 64;
    data.train_loader.batch_size = 2;
    data.train_loader.num_workers = 2;
    let mut train = PidNetTrainConfig {
        validate_every_epochs: 0,
        validate_at_end: false,
        run_dir: run_dir.to_path_buf(),
        ..PidNetTrainConfig::default()
    };
    configure(&mut train);
    PidNetSetup {
        model: PidNetConfig::new(PidNetSize::S, 19),
        data,
        loss: PidNetLossConfig {
            ohem: OhemConfig {
                thresh: 0.9,
                min_kept: 500,
            },
            ..PidNetLossConfig::default()
        },
        train,
        experiment_text: String::new(),
    }
}

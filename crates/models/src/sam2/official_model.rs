//! An official SAM 2 / SAM 2.1 checkpoint used as it is: its model size recognised from its
//! tensors, then loaded strictly (`sam2.1_hiera_tiny.pt` is all a user has to give).
//!
//! A state dict does not show everything about a Hiera model (a `qkv` weight has the same shape
//! for any number of heads, and which blocks attend globally leaves no trace), so a file is not
//! parsed into a configuration: it is compared with the four official ones. A file is of size
//! `t` when every tensor the `t` image model has is in it, under the same name and with the
//! same shape; the four sizes differ in widths and depths, so at most one can match. Any other
//! configuration (a model trained with a modified yaml, the reduced model of the test fixtures)
//! is given explicitly as a [`Sam2Config`].

use std::collections::BTreeMap;
use std::fmt;

use burn::tensor::backend::Backend;

use super::import::load_sam2_tensors;
use super::{EncoderConfig, HieraSize, Sam2, Sam2Config, Sam2Error};
use crate::tensor_file::NamedTensors;
use crate::weights::{dotted_path, named_shapes, LoadReport};

/// The official sizes, smallest first.
pub const OFFICIAL_SIZES: [HieraSize; 4] = [
    HieraSize::Tiny,
    HieraSize::Small,
    HieraSize::BasePlus,
    HieraSize::Large,
];

/// The size's name in the official configs and checkpoints (`t`, `s`, `b+`, `l`).
pub fn size_name(size: HieraSize) -> &'static str {
    match size {
        HieraSize::Tiny => "t",
        HieraSize::Small => "s",
        HieraSize::BasePlus => "b+",
        HieraSize::Large => "l",
    }
}

/// How well a file fits one official size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeFit {
    /// The size compared with.
    pub size: HieraSize,
    /// Tensors of that model found with the right shape.
    pub matched: usize,
    /// Tensors of that model.
    pub expected: usize,
    /// The first tensor that is missing or has another shape, described.
    pub first_problem: Option<String>,
}

/// A checkpoint that is none of the official image models.
#[derive(Debug, Clone, PartialEq)]
pub struct UnrecognisedModel {
    /// The file, as named in the message.
    pub source_name: String,
    /// The comparison with every official size.
    pub fits: Vec<SizeFit>,
}

impl fmt::Display for UnrecognisedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not an official SAM 2.1 image model: its tensors match none of the sizes t, s, \
             b+, l",
            self.source_name
        )?;
        // The largest share of matching tensors; the smaller size on a tie.
        let share = |fit: &SizeFit| fit.matched as f64 / fit.expected.max(1) as f64;
        let closest = self
            .fits
            .iter()
            .reduce(|best, fit| if share(fit) > share(best) { fit } else { best });
        if let Some(fit) = closest.filter(|fit| fit.matched > 0) {
            write!(
                f,
                " (closest: {}, {} of its {} tensors present with the official shape",
                size_name(fit.size),
                fit.matched,
                fit.expected
            )?;
            if let Some(problem) = &fit.first_problem {
                write!(f, "; {problem}")?;
            }
            write!(f, ")")?;
        } else {
            write!(
                f,
                " (none of their tensors is in it with the official shape)"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for UnrecognisedModel {}

/// Why an official checkpoint could not become a model.
#[derive(Debug, thiserror::Error)]
pub enum OfficialModelError {
    /// No official size fits and no configuration was given.
    #[error(transparent)]
    Unrecognised(#[from] UnrecognisedModel),
    /// The configuration is invalid, or the weights do not fit it (strict loading).
    #[error(transparent)]
    Model(#[from] Sam2Error),
}

/// `(official key, shape)` of every tensor of the image model of `config`, without allocating
/// the weights.
fn expected_shapes<B: Backend>(
    config: &Sam2Config,
    device: &B::Device,
) -> Vec<(String, Vec<usize>)> {
    named_shapes(&config.init::<B>(device), &dotted_path)
}

/// Compares the tensors `shape_of` knows (official keys, without the `model.` wrapper) with
/// each official size; the one they fit, or every comparison.
pub fn detect_hiera_size<B: Backend>(
    shape_of: &dyn Fn(&str) -> Option<Vec<usize>>,
    device: &B::Device,
) -> Result<HieraSize, Vec<SizeFit>> {
    let mut fits = Vec::with_capacity(OFFICIAL_SIZES.len());
    for size in OFFICIAL_SIZES {
        let expected = expected_shapes::<B>(&Sam2Config::sam2_1_hiera(size), device);
        let mut fit = SizeFit {
            size,
            matched: 0,
            expected: expected.len(),
            first_problem: None,
        };
        for (key, shape) in &expected {
            match shape_of(key) {
                Some(found) if &found == shape => fit.matched += 1,
                found => {
                    fit.first_problem.get_or_insert_with(|| match found {
                        Some(found) => format!("`{key}` is {found:?}, not {shape:?}"),
                        None => format!("`{key}` is missing"),
                    });
                }
            }
        }
        if fit.matched == fit.expected {
            return Ok(size);
        }
        fits.push(fit);
    }
    Err(fits)
}

/// An image model built from a checkpoint.
#[derive(Debug)]
pub struct OfficialModel<B: Backend> {
    /// The model, with every tensor from the file.
    pub model: Sam2<B>,
    /// What the load found (the video-memory tensors are in `not_used`).
    pub report: LoadReport,
    /// The configuration the model was built from.
    pub config: Sam2Config,
    /// The official size the file was recognised as; `None` when `config` was given.
    pub size: Option<HieraSize>,
}

/// Builds the image model of `tensors` (an official checkpoint read with
/// [`super::import::read_checkpoint`]; `source_name` names it in errors) and loads it strictly.
/// Without `config`, the model is the official size the tensors fit ([`detect_hiera_size`]).
pub fn image_model_from_checkpoint<B: Backend>(
    tensors: &NamedTensors,
    config: Option<Sam2Config>,
    source_name: &str,
    device: &B::Device,
) -> Result<OfficialModel<B>, OfficialModelError> {
    model_from_checkpoint(
        tensors,
        config,
        source_name,
        device,
        Sam2Config::sam2_1_hiera,
    )
}

/// [`image_model_from_checkpoint`] for the whole `SAM2Base`: the image model and the video
/// memory ([`Sam2Config::sam2_1_hiera_video`]), so every tensor of an official file is used. A
/// given `config` must have `video`; a file without the video tensors fails the strict load,
/// which names them.
pub fn video_model_from_checkpoint<B: Backend>(
    tensors: &NamedTensors,
    config: Option<Sam2Config>,
    source_name: &str,
    device: &B::Device,
) -> Result<OfficialModel<B>, OfficialModelError> {
    if config.as_ref().is_some_and(|c| c.video.is_none()) {
        return Err(Sam2Error::Config(format!(
            "tracking with {source_name} needs a configuration with `video: Some(...)`"
        ))
        .into());
    }
    model_from_checkpoint(
        tensors,
        config,
        source_name,
        device,
        Sam2Config::sam2_1_hiera_video,
    )
}

/// Builds the model of `config`, or of `preset(size)` for the official size the tensors fit,
/// and loads it strictly.
fn model_from_checkpoint<B: Backend>(
    tensors: &NamedTensors,
    config: Option<Sam2Config>,
    source_name: &str,
    device: &B::Device,
    preset: fn(HieraSize) -> Sam2Config,
) -> Result<OfficialModel<B>, OfficialModelError> {
    let (config, size) = match config {
        Some(config) => (config, None),
        None => {
            let shapes: BTreeMap<&str, Vec<usize>> = tensors
                .iter()
                .map(|(key, data)| (key.as_str(), data.shape.to_vec()))
                .collect();
            let size = detect_hiera_size::<B>(&|key| shapes.get(key).cloned(), device).map_err(
                |fits| UnrecognisedModel {
                    source_name: source_name.to_string(),
                    fits,
                },
            )?;
            (preset(size), Some(size))
        }
    };
    config.check()?;
    if !matches!(config.image_encoder, Some(EncoderConfig::Hiera(_))) {
        return Err(Sam2Error::Config(format!(
            "{source_name} holds a Hiera image encoder, so the configuration needs \
             image_encoder: Hiera(...)"
        ))
        .into());
    }
    let (model, report) = load_sam2_tensors(config.init::<B>(device), tensors, true, source_name)?;
    Ok(OfficialModel {
        model,
        report,
        config,
        size,
    })
}

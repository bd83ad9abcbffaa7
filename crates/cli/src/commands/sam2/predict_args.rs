//! The arguments of `predict-sam2`, shared by its two paths: a segburn checkpoint (`predict`)
//! and an official one (`predict_official`).

use std::path::PathBuf;

use burn::module::Module;
use burn::tensor::{backend::Backend, DType};
use segburn_models::weights::cast_floats;
use segburn_train::sam2::user_prompts::ImagePrompts;

use crate::commands::sam2::everything::EverythingArgs;
use crate::device::DeviceConfig;

/// How many masks the decoder proposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Multimask {
    /// Three for a single click (an ambiguous prompt), one for anything else, as the official
    /// SAM2 examples call the predictor.
    Auto,
    /// Always three proposals; the one with the highest predicted IoU is kept.
    Multi,
    /// One mask (SAM 2.1 replaces it by the best of three when it is unstable).
    Single,
}

impl Multimask {
    /// Whether the decoder makes three proposals for `prompts`.
    pub fn for_prompts(self, prompts: &ImagePrompts) -> bool {
        match self {
            Self::Auto => prompts.clicks.len() == 1 && prompts.bbox.is_none(),
            Self::Multi => true,
            Self::Single => false,
        }
    }
}

/// Parsed `predict-sam2` arguments.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "predict-sam2",
    about = "Segment the object a set of prompts points at: writes <stem>_mask.png, <stem>_overlay.png \
             and <stem>_low_res.safetensors (the logits --mask-input takes)"
)]
pub struct PredictSam2Args {
    /// A segburn SAM2 checkpoint (its embedded experiment gives the model size), a run
    /// directory (its newest checkpoint), a run's checkpoints/latest or checkpoints/best, or
    /// an official SAM 2.1 checkpoint (sam2.1_hiera_tiny.pt, _small, _base_plus, _large; the
    /// size is recognised from its tensors).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: PathBuf,
    /// The image (PNG or JPEG), any size.
    pub image: PathBuf,
    /// Clicks `x,y,label` separated by `;` (label 1 positive, 0 negative), in image pixels.
    #[arg(long, value_name = "X,Y,LABEL;…", allow_hyphen_values = true)]
    pub points: Option<String>,
    /// A box `x0,y0,x1,y1` in image pixels.
    #[arg(long = "box", value_name = "X0,Y0,X1,Y1", allow_hyphen_values = true)]
    pub bbox: Option<String>,
    /// The low-resolution mask logits of an earlier run (its `<stem>_low_res.safetensors`),
    /// alone or with clicks and a box: refines that mask, as the official predictor's
    /// `mask_input`.
    #[arg(long, value_name = "FILE")]
    pub mask_input: Option<PathBuf>,
    /// Where the mask and the overlay go.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A cached embedding of IMAGE, for checkpoints trained without an image encoder.
    #[arg(long, value_name = "FILE")]
    pub embedding: Option<PathBuf>,
    /// Only for an official-format checkpoint of another shape than the four official models:
    /// its model configuration, a JSON `Sam2Config` (as Burn's `Config::save` writes it).
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// Three mask proposals (the best is kept) or one: auto = three for a single click.
    #[arg(long, value_enum, default_value = "auto")]
    pub multimask: Multimask,
    /// The float type the model computes in: its weights, the image and the prompts are cast
    /// to it (f64 for reference runs; bf16/f16 halve the memory where the device has them).
    #[arg(long, value_enum, default_value = "f32", ignore_case = true)]
    pub precision: InferencePrecision,
    /// Where the model runs: Cpu, Wgpu(N) (a build with --features wgpu) or Cuda(N)
    /// (--features cuda), as the `device` field of an experiment.
    #[arg(long, value_name = "DEVICE", default_value = "Cpu", value_parser = parse_device)]
    pub device: DeviceConfig,
    /// "Segment everything" instead of prompts (official checkpoints).
    #[command(flatten)]
    pub everything: EverythingArgs,
}

/// `--precision`: the float type of the whole prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InferencePrecision {
    F32,
    F64,
    Bf16,
    F16,
}

impl InferencePrecision {
    pub fn dtype(self) -> DType {
        match self {
            Self::F32 => DType::F32,
            Self::F64 => DType::F64,
            Self::Bf16 => DType::BF16,
            Self::F16 => DType::F16,
        }
    }

    /// `model` with every float cast to this precision, or why `device` cannot compute in it
    /// (f64 and bf16 on a wgpu adapter, f16 on one without `shader-f16`).
    pub fn apply<B: Backend, M: Module<B>>(
        self,
        model: M,
        device: &B::Device,
    ) -> anyhow::Result<M> {
        let dtype = self.dtype();
        if !B::supports_dtype(device, dtype) {
            anyhow::bail!(
                "--precision {self:?}: device {device:?} ({}) does not compute in {dtype:?}; \
                 use --precision f32",
                B::name(device)
            );
        }
        Ok(cast_floats(model, dtype))
    }
}

/// `--device`: `Cpu`, `Wgpu(0)`, `Cuda(1)`, as an experiment's `device` field spells it.
pub fn parse_device(text: &str) -> Result<DeviceConfig, String> {
    serde_json::from_value(crate::experiment::overrides::parse_value(text))
        .map_err(|_| format!("`{text}` is not a device: use Cpu, Wgpu(N) or Cuda(N)"))
}

//! Loading and saving SAM2 weights under the official key names.
//!
//! Two layouts exist:
//! * official SAM2/SAM2.1 checkpoints: `torch.save({"model": state_dict})` with SAM2Base's
//!   prefixes `sam_prompt_encoder.` / `sam_mask_decoder.`, next to the Hiera image encoder and the
//!   video-memory modules, which are not ported and come back in the report's `unexpected` list;
//! * plain module state dicts without prefix (the reference fixtures: `mask_decoder.pt`,
//!   `prompt_encoder.safetensors`).
//!
//! Field names equal the official names, so the key of every parameter is its Burn path
//! ([`dotted_path`]); no table is involved.

use std::path::Path;

use burn::tensor::backend::Backend;

use super::{MaskDecoder, PromptEncoder, Sam2, Sam2Error};
use crate::tensor_file::{read_safetensors, NamedTensors};
use crate::weights::{
    dotted_path, export_named, load_named, read_tensor_file, strip_prefixes, LoadOptions,
    LoadReport, WeightsError,
};

/// Prefix of the prompt encoder in SAM2Base checkpoints.
pub const PROMPT_ENCODER_PREFIX: &str = "sam_prompt_encoder.";
/// Prefix of the mask decoder in SAM2Base checkpoints.
pub const MASK_DECODER_PREFIX: &str = "sam_mask_decoder.";

/// Reads a `.pt`/`.pth`/`.safetensors` file and removes wrapper prefixes (`model.` from the
/// official `{"model": ...}` dictionary, `module.` from DDP).
pub fn read_checkpoint(path: &Path) -> Result<NamedTensors, WeightsError> {
    // `read_tensor_file` sniffs the format from the first bytes, and a safetensors header whose
    // length has 0x80 as its low byte looks like a legacy pickle (the fixture
    // `mask_decoder.safetensors` does): trust the extension when it says safetensors.
    let is_safetensors = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
    let tensors = if is_safetensors {
        read_safetensors(path)?
    } else {
        read_tensor_file(path)?
    };
    Ok(strip_prefixes(tensors, &["model.", "module."]))
}

/// Loads an official SAM2/SAM2.1 checkpoint (or one of ours) into the prompt encoder and the
/// mask decoder of `model`. Our own image encoder, when present, is loaded too if the file has
/// its keys (files written by [`export`]); otherwise it keeps its weights and its keys are not
/// reported as missing, since official files cannot hold them.
///
/// `strict`: fail unless every head parameter is loaded with the right shape and no unknown
/// key sits under the heads' prefixes. Keys of modules we do not port (the Hiera encoder,
/// memory attention, …) never fail a load; they are listed in `unexpected`.
pub fn load_official<B: Backend>(
    model: Sam2<B>,
    path: &Path,
    strict: bool,
) -> Result<(Sam2<B>, LoadReport), Sam2Error> {
    let tensors = read_checkpoint(path)?;
    load_sam2_tensors(model, &tensors, strict, &path.display().to_string())
}

/// [`load_official`] on tensors already in memory; `source_name` names them in errors.
pub fn load_sam2_tensors<B: Backend>(
    mut model: Sam2<B>,
    tensors: &NamedTensors,
    strict: bool,
    source_name: &str,
) -> Result<(Sam2<B>, LoadReport), Sam2Error> {
    let has_our_encoder = model.image_encoder.is_some()
        && tensors.keys().any(|k| k.starts_with("image_encoder.stem."));
    // An official file's `image_encoder.*` is Hiera: keep our encoder out of the mapping.
    let encoder = if has_our_encoder {
        None
    } else {
        model.image_encoder.take()
    };
    let options = LoadOptions::partial(source_name);
    let (mut model, report) = load_named(model, tensors, &dotted_path, &options)?;
    if model.image_encoder.is_none() {
        model.image_encoder = encoder;
    }
    let foreign_unexpected = |key: &String| {
        key.starts_with(PROMPT_ENCODER_PREFIX) || key.starts_with(MASK_DECODER_PREFIX)
    };
    if strict
        && (!report.missing.is_empty()
            || !report.shape_mismatched.is_empty()
            || report.unexpected.iter().any(foreign_unexpected))
    {
        return Err(WeightsError::Strict {
            source_name: source_name.to_string(),
            report: Box::new(report),
        }
        .into());
    }
    Ok((model, report))
}

/// Loads a prompt encoder from a state dict without prefix (e.g. `prompt_encoder.pt`).
/// A file with the SAM2Base prefix is accepted too.
pub fn load_prompt_encoder<B: Backend>(
    module: PromptEncoder<B>,
    path: &Path,
    strict: bool,
) -> Result<(PromptEncoder<B>, LoadReport), Sam2Error> {
    let tensors = strip_prefixes(read_checkpoint(path)?, &[PROMPT_ENCODER_PREFIX]);
    load_part(module, &tensors, strict, path)
}

/// Loads a mask decoder from a state dict without prefix (e.g. `mask_decoder.safetensors`).
/// A file with the SAM2Base prefix is accepted too.
pub fn load_mask_decoder<B: Backend>(
    module: MaskDecoder<B>,
    path: &Path,
    strict: bool,
) -> Result<(MaskDecoder<B>, LoadReport), Sam2Error> {
    let tensors = strip_prefixes(read_checkpoint(path)?, &[MASK_DECODER_PREFIX]);
    load_part(module, &tensors, strict, path)
}

fn load_part<B: Backend, M: burn::module::Module<B>>(
    module: M,
    tensors: &NamedTensors,
    strict: bool,
    path: &Path,
) -> Result<(M, LoadReport), Sam2Error> {
    let name = path.display().to_string();
    let options = if strict {
        LoadOptions::strict(name)
    } else {
        LoadOptions::partial(name)
    };
    Ok(load_named(module, tensors, &dotted_path, &options)?)
}

/// Every tensor of the model under official keys (`sam_prompt_encoder.*`, `sam_mask_decoder.*`,
/// and `image_encoder.*` for our encoder), including the position-encoding buffer.
pub fn export<B: Backend>(model: &Sam2<B>) -> NamedTensors {
    export_named(model, &dotted_path)
}

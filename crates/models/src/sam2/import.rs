//! Loading and saving SAM2 weights under the official key names.
//!
//! Two layouts exist:
//! * official SAM2/SAM2.1 checkpoints: `torch.save({"model": state_dict})` with SAM2Base's
//!   prefixes `sam_prompt_encoder.` / `sam_mask_decoder.` / `image_encoder.` and `no_mem_embed`,
//!   next to the video-memory modules, which an image model does not have: they come back in the
//!   report's `not_used` list;
//! * plain module state dicts without prefix (the reference fixtures: `prompt_encoder.pt`,
//!   `mask_decoder_subset.pt`, `mask_decoder.safetensors`).
//!
//! Field names equal the official names, so the key of every parameter is its Burn path
//! ([`dotted_path`]); no table is involved.

use std::path::Path;

use burn::tensor::backend::Backend;

use super::{MaskDecoder, PromptEncoder, Sam2, Sam2Error, Sam2ImageEncoder};
use crate::tensor_file::{read_safetensors, NamedTensors};
use crate::weights::{
    dotted_path, export_named, load_named, read_tensor_file, strip_prefixes, LoadOptions,
    LoadReport, WeightsError,
};

/// Prefix of the prompt encoder in SAM2Base checkpoints.
pub const PROMPT_ENCODER_PREFIX: &str = "sam_prompt_encoder.";
/// Prefix of the mask decoder in SAM2Base checkpoints.
pub const MASK_DECODER_PREFIX: &str = "sam_mask_decoder.";

/// SAM2Base's modules and parameters that only the video path uses (memory attention, memory
/// encoder, object pointers, …); a `.` ends a module prefix, other entries are whole keys.
pub const VIDEO_MEMORY_KEYS: &[&str] = &[
    "memory_attention.",
    "memory_encoder.",
    "mask_downsample.",
    "obj_ptr_proj.",
    "obj_ptr_tpos_proj.",
    "maskmem_tpos_enc",
    "no_mem_pos_enc",
    "no_obj_ptr",
    "no_obj_embed_spatial",
];

/// Whether `key` belongs to the video-memory part of SAM2Base ([`VIDEO_MEMORY_KEYS`]).
pub fn is_video_memory_key(key: &str) -> bool {
    VIDEO_MEMORY_KEYS.iter().any(|entry| {
        if entry.ends_with('.') {
            key.starts_with(entry)
        } else {
            key == *entry
        }
    })
}

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

/// Loads an official SAM2/SAM2.1 checkpoint (or one of ours) into `model`.
///
/// A Hiera model takes the whole image model from the file: encoder, `no_mem_embed`, prompt
/// encoder and mask decoder. Our CNN encoder, when present, is loaded too if the file has its
/// keys (files written by [`export`]); otherwise it keeps its weights and its keys are not
/// reported as missing, since official files cannot hold them.
///
/// `strict`: fail unless every parameter of the model is loaded with the right shape and no
/// unknown key sits under the model's prefixes (for a Hiera model: no unknown key at all). The
/// video-memory keys ([`VIDEO_MEMORY_KEYS`]) never fail a load; they are listed in `not_used`.
/// A model without Hiera lists an official file's `image_encoder.*` / `no_mem_embed` keys in
/// `unexpected` without failing.
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
    let is_hiera = model
        .image_encoder
        .as_ref()
        .is_some_and(Sam2ImageEncoder::is_hiera);
    let is_cnn = model.image_encoder.is_some() && !is_hiera;
    let file_has_cnn = tensors.keys().any(|k| k.starts_with("image_encoder.stem."));
    // An official file's `image_encoder.*` is Hiera: keep our CNN out of the mapping.
    let set_aside = if is_cnn && !file_has_cnn {
        model.image_encoder.take()
    } else {
        None
    };
    let options = LoadOptions::partial(source_name);
    let (mut model, mut report) = load_named(model, tensors, &dotted_path, &options)?;
    if set_aside.is_some() {
        model.image_encoder = set_aside;
    }
    let (not_used, unexpected) = std::mem::take(&mut report.unexpected)
        .into_iter()
        .partition(|key| is_video_memory_key(key));
    report.not_used = not_used;
    report.unexpected = unexpected;
    let foreign_unexpected = |key: &String| {
        is_hiera || key.starts_with(PROMPT_ENCODER_PREFIX) || key.starts_with(MASK_DECODER_PREFIX)
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

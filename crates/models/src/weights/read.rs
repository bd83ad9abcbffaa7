//! Reading tensor files: safetensors, or PyTorch pickles (tensors only; no code is executed).

use std::path::Path;

use burn_store::pytorch::PytorchReader;

use super::WeightsError;
use crate::tensor_file::{read_safetensors, NamedTensors};

/// Reads every tensor of a `.safetensors` or PyTorch (`.pt`, `.pth`, `.pth.tar`) file.
///
/// A `.safetensors` name is trusted; otherwise the format is recognised by its first bytes: a
/// `torch.save` file is a zip archive (`PK`) or, in the legacy format, a pickle. (Sniffing a
/// safetensors file is unreliable: its first byte is the header length, which may be 0x80, the
/// pickle marker.) Nested dictionaries (`{"state_dict": {...}}`, `{"model": {...}}`) come back
/// with dotted keys; see [`strip_prefixes`].
pub fn read_tensor_file(path: &Path) -> Result<NamedTensors, WeightsError> {
    let named_safetensors = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("safetensors"));
    let tensors = if named_safetensors {
        read_safetensors(path)?
    } else {
        let head = read_head(path)?;
        let is_zip = head.starts_with(b"PK");
        let is_legacy_pickle = head.first() == Some(&0x80);
        if is_zip {
            read_pytorch(path)?
        } else if is_legacy_pickle {
            read_pytorch(path)
                .or_else(|pickle_error| read_safetensors(path).map_err(|_| pickle_error))?
        } else {
            read_safetensors(path)?
        }
    };
    if tensors.is_empty() {
        return Err(WeightsError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(tensors)
}

fn read_head(path: &Path) -> Result<Vec<u8>, WeightsError> {
    use std::io::Read;
    let io_error = |source| crate::tensor_file::TensorFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io_error)?;
    let mut head = vec![0u8; 8];
    let n = file.read(&mut head).map_err(io_error)?;
    head.truncate(n);
    Ok(head)
}

fn read_pytorch(path: &Path) -> Result<NamedTensors, WeightsError> {
    let pytorch_error = |message: String| WeightsError::Pytorch {
        path: path.to_path_buf(),
        message,
    };
    let reader = PytorchReader::new(path).map_err(|e| pytorch_error(e.to_string()))?;
    let mut out = NamedTensors::new();
    for (key, snapshot) in reader.into_tensors() {
        let data = snapshot
            .to_data()
            .map_err(|e| pytorch_error(format!("tensor `{key}`: {e}")))?;
        out.insert(key, data);
    }
    Ok(out)
}

/// Removes wrapper prefixes (`state_dict.`, `module.`, `model.`, …) from the front of every key,
/// repeatedly, as PyTorch wrappers nest them (`model.module.conv1.weight`).
pub fn strip_prefixes(tensors: NamedTensors, prefixes: &[&str]) -> NamedTensors {
    tensors
        .into_iter()
        .map(|(mut key, data)| {
            while let Some(rest) = prefixes.iter().find_map(|p| key.strip_prefix(p)) {
                key = rest.to_string();
            }
            (key, data)
        })
        .collect()
}

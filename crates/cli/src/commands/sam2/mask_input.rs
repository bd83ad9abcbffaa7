//! `predict-sam2 --mask-input FILE`: the low-resolution mask logits of an earlier prediction,
//! the official predictor's `mask_input`, read from and written to a safetensors file.
//!
//! Every run writes `<stem>_low_res.safetensors` (the chosen mask's logits, clamped to ±32 as
//! upstream returns them); passing it back with `--mask-input`, alone or with clicks, refines
//! that mask as `SAM2ImagePredictor.predict(mask_input=…)` does.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use burn::tensor::{backend::Backend, DType, Tensor, TensorData};
use segburn_models::tensor_file::{read_safetensors, serialize_safetensors, NamedTensors};

/// The key of the logits in the files this command writes (the only tensor in them).
pub const LOW_RES_KEY: &str = "low_res_mask";

/// Reads `path`: one float tensor of `[h, w]`, `[1, h, w]` or `[1, 1, h, w]` logits with
/// `[h, w]` = `size` (a quarter of the model's input side), as a `[1, 1, h, w]` tensor of
/// `dtype` (the model's: an f64 file keeps its precision in an f64 model).
pub fn read_mask_input<B: Backend>(
    path: &Path,
    size: [usize; 2],
    dtype: DType,
    device: &B::Device,
) -> anyhow::Result<Tensor<B, 4>> {
    let tensors =
        read_safetensors(path).with_context(|| format!("--mask-input {}", path.display()))?;
    let mut entries = tensors.into_iter();
    let (key, data) = match (entries.next(), entries.next()) {
        (Some(entry), None) => entry,
        (None, _) => bail!("--mask-input {}: the file holds no tensor", path.display()),
        (Some(_), Some(_)) => bail!(
            "--mask-input {}: expected one tensor (the `{LOW_RES_KEY}` a previous predict-sam2 \
             run wrote), found several",
            path.display()
        ),
    };
    let shape = data.shape.to_vec();
    let plane = match shape.as_slice() {
        [h, w] | [1, h, w] | [1, 1, h, w] => [*h, *w],
        _ => [0, 0],
    };
    if plane != size {
        bail!(
            "--mask-input {}: `{key}` has shape {shape:?}; this model takes low-resolution mask \
             logits of [{}, {}] (a quarter of its input side), e.g. the {LOW_RES_KEY} of a \
             previous run",
            path.display(),
            size[0],
            size[1]
        );
    }
    let values: Vec<f64> = data.convert::<f64>().to_vec().map_err(|e| {
        anyhow::anyhow!(
            "--mask-input {}: `{key}` is not a float tensor: {e:?}",
            path.display()
        )
    })?;
    if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
        bail!(
            "--mask-input {}: `{key}` holds {bad}; mask logits must be finite",
            path.display()
        );
    }
    Ok(Tensor::from_data(
        TensorData::new(values, [1, 1, size[0], size[1]]).convert_dtype(dtype),
        (device, dtype),
    ))
}

/// Writes `logits` (`[1, 1, h, w]`) as `<out>/<stem>_low_res.safetensors`, in f64 from an f64
/// model and in f32 otherwise; returns the path.
pub fn write_low_res<B: Backend>(
    out: &Path,
    stem: &str,
    logits: Tensor<B, 4>,
) -> anyhow::Result<PathBuf> {
    let path = out.join(format!("{stem}_low_res.safetensors"));
    let data = logits.into_data();
    let data = if data.dtype == DType::F64 {
        data
    } else {
        data.convert::<f32>()
    };
    let tensors: NamedTensors = [(LOW_RES_KEY.to_string(), data)].into_iter().collect();
    let bytes = serialize_safetensors(&tensors, None, &path)?;
    std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{flex::FlexDevice, Flex};

    #[test]
    fn written_logits_read_back_and_wrong_shapes_name_the_file() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let device = FlexDevice;
        let values: Vec<f32> = (0..64).map(|i| i as f32 - 31.5).collect();
        let logits =
            Tensor::<Flex, 4>::from_data(TensorData::new(values.clone(), [1, 1, 8, 8]), &device);
        let path = write_low_res(dir.path(), "photo", logits).expect("write");
        let back = read_mask_input::<Flex>(&path, [8, 8], DType::F32, &device).expect("read");
        assert_eq!(back.dims(), [1, 1, 8, 8]);
        let read: Vec<f32> = back.into_data().to_vec().expect("f32");
        assert_eq!(read, values);
        let error = read_mask_input::<Flex>(&path, [16, 16], DType::F32, &device).unwrap_err();
        let message = format!("{error:#}");
        assert!(message.contains("photo_low_res.safetensors"), "{message}");
        assert!(message.contains("[16, 16]"), "{message}");
    }
}

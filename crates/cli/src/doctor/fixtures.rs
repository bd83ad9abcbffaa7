//! `doctor --fixtures DIR`: the real models on each device against the reference outputs of
//! the official PyTorch code (the repository's `tests/fixtures`, whose weights are built from
//! their key listings by the fixtures' formula): PIDNet-S eval outputs, and the SAM2 prompt
//! encoder + mask decoder (multimask). A deeper kernel check than the small operations: every
//! layer the models use runs once, with official weights.

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use burn::tensor::{FloatDType, Tensor, TensorData};
use segburn_models::fixtures::fixture_path_in;
use segburn_models::pidnet::{load_pidnet, LoadMode, PidNetConfig, PidNetSize};
use segburn_models::sam2::{
    import, HighResFeatures, MaskDecoderConfig, MaskDecoderInput, PointPrompts, PromptEncoderConfig,
};
use segburn_models::tensor_file::{read_safetensors, NamedTensors};
use serde::Serialize;

/// The fixtures README's bound for PIDNet (f32 vs f64 of the official model differ by 3e-4
/// on logits up to |62|); SAM2's outputs are below |20|, where 1e-3 is as strict.
pub const FIXTURE_TOLERANCE: f64 = 1e-3;

/// One output compared with the official reference.
#[derive(Debug, Clone, Serialize)]
pub struct FixtureComparison {
    pub name: String,
    pub max_abs_error: f64,
    /// `None`: reported only (e.g. bf16, whose error is expected to be large).
    pub tolerance: Option<f64>,
}

impl FixtureComparison {
    pub fn passed(&self) -> bool {
        self.tolerance.is_none_or(|t| self.max_abs_error <= t)
    }
}

struct Files {
    dir: PathBuf,
}

impl Files {
    fn read(&self, relative: &str) -> Result<NamedTensors, String> {
        read_safetensors(&self.path(relative)?).map_err(|e| format!("{e}"))
    }

    /// A stored file, or formula weights built from the listing beside it.
    fn path(&self, relative: &str) -> Result<PathBuf, String> {
        fixture_path_in(&self.dir, relative).map_err(|e| format!("{e}"))
    }
}

fn get<'a>(tensors: &'a NamedTensors, key: &str, file: &str) -> Result<&'a TensorData, String> {
    tensors
        .get(key)
        .ok_or_else(|| format!("{file}: no key `{key}`"))
}

fn float<B: Backend, const D: usize>(
    tensors: &NamedTensors,
    key: &str,
    file: &str,
    device: &B::Device,
) -> Result<Tensor<B, D>, String> {
    let data = get(tensors, key, file)?.clone().convert::<f32>();
    if data.shape.len() != D {
        return Err(format!(
            "{file}: `{key}` has rank {}, expected {D}",
            data.shape.len()
        ));
    }
    Ok(Tensor::from_data(data, device))
}

fn compare<B: Backend, const D: usize>(
    name: &str,
    ours: Tensor<B, D>,
    reference: &NamedTensors,
    key: &str,
    tolerance: Option<f64>,
) -> Result<FixtureComparison, String> {
    let expected = get(reference, key, "outputs")?.clone().convert::<f64>();
    let expected = expected
        .to_vec::<f64>()
        .map_err(|e| format!("{key}: {e:?}"))?;
    let ours = ours
        .cast(FloatDType::F32)
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .map_err(|e| format!("{key}: cannot read the result back: {e:?}"))?;
    let max_abs_error = if ours.len() == expected.len() {
        ours.iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(
                0.0,
                |m, d| if d.is_nan() { f64::INFINITY } else { m.max(d) },
            )
    } else {
        f64::INFINITY
    };
    Ok(FixtureComparison {
        name: name.to_string(),
        max_abs_error,
        tolerance,
    })
}

/// PIDNet-S (official weights) in eval mode on the fixture input, in f32 (checked) and bf16
/// (reported).
pub fn check_pidnet<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<Vec<FixtureComparison>, String> {
    let files = Files {
        dir: dir.to_path_buf(),
    };
    let weights = files.path("pidnet_s/state_dict.safetensors")?;
    let model = PidNetConfig::new(PidNetSize::S, 19).init::<B>(device);
    let (model, _) = load_pidnet(model, &weights, LoadMode::Strict).map_err(|e| e.to_string())?;
    let input: Tensor<B, 4> = float(
        &files.read("pidnet_s/input.safetensors")?,
        "input",
        "input",
        device,
    )?;
    let reference = files.read("pidnet_s/outputs.safetensors")?;
    let out = model.forward(input.clone()).map_err(|e| e.to_string())?;
    let mut comparisons = vec![
        compare(
            "PIDNet-S eval main vs official",
            out.main,
            &reference,
            "main",
            Some(FIXTURE_TOLERANCE),
        )?,
        compare(
            "PIDNet-S eval p_aux vs official",
            out.p_aux,
            &reference,
            "p_aux",
            Some(FIXTURE_TOLERANCE),
        )?,
        compare(
            "PIDNet-S eval boundary vs official",
            out.boundary,
            &reference,
            "boundary",
            Some(FIXTURE_TOLERANCE),
        )?,
    ];
    let half = model
        .forward(input.cast(FloatDType::BF16))
        .map_err(|e| e.to_string())?;
    comparisons.push(compare(
        "PIDNet-S eval main in bf16 vs official f32",
        half.main,
        &reference,
        "main",
        None,
    )?);
    Ok(comparisons)
}

/// The SAM2 prompt encoder + mask decoder (official weights) on the fixture prompts,
/// multimask output.
pub fn check_sam2<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<Vec<FixtureComparison>, String> {
    let files = Files {
        dir: dir.to_path_buf(),
    };
    let encoder = PromptEncoderConfig::new([16, 16], [256, 256]).init::<B>(device);
    let (encoder, _) = import::load_prompt_encoder(
        encoder,
        &files.path("sam2/prompt_encoder.safetensors")?,
        true,
    )
    .map_err(|e| e.to_string())?;
    let decoder = MaskDecoderConfig::new().init::<B>(device);
    let (decoder, _) =
        import::load_mask_decoder(decoder, &files.path("sam2/mask_decoder.safetensors")?, true)
            .map_err(|e| e.to_string())?;
    let inputs = files.read("sam2/inputs.safetensors")?;
    let file = "sam2/inputs.safetensors";
    let labels: Tensor<B, 2> = float(&inputs, "point_labels", file, device)?;
    let points = PointPrompts {
        coords: float(&inputs, "point_coords", file, device)?,
        labels: labels.int(),
    };
    let prompts = encoder
        .forward(
            Some(&points),
            Some(float(&inputs, "boxes", file, device)?),
            None,
        )
        .map_err(|e| e.to_string())?;
    let output = decoder
        .forward(
            MaskDecoderInput {
                image_embeddings: float(&inputs, "image_embeddings", file, device)?,
                image_pe: encoder.get_dense_pe(),
                sparse_prompt_embeddings: prompts.sparse,
                dense_prompt_embeddings: prompts.dense,
                high_res_features: Some(HighResFeatures {
                    feat_s0: float(&inputs, "feat_s0", file, device)?,
                    feat_s1: float(&inputs, "feat_s1", file, device)?,
                }),
            },
            true,
        )
        .map_err(|e| e.to_string())?;
    let reference = files.read("sam2/outputs_multimask.safetensors")?;
    Ok(vec![
        compare(
            "SAM2 decoder masks vs official",
            output.masks,
            &reference,
            "low_res_masks",
            Some(FIXTURE_TOLERANCE),
        )?,
        compare(
            "SAM2 decoder IoU vs official",
            output.iou_pred,
            &reference,
            "iou_pred",
            Some(FIXTURE_TOLERANCE),
        )?,
        compare(
            "SAM2 object score vs official",
            output.object_score_logits,
            &reference,
            "object_score_logits",
            Some(FIXTURE_TOLERANCE),
        )?,
    ])
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;

    use super::*;

    #[test]
    fn flex_matches_the_official_fixtures() {
        let dir = segburn_models::fixtures::fixtures_dir();
        let device = Default::default();
        let pidnet = check_pidnet::<Flex>(&dir, &device).unwrap();
        let sam2 = check_sam2::<Flex>(&dir, &device).unwrap();
        for c in pidnet.iter().chain(&sam2) {
            assert!(c.passed(), "{c:?}");
        }
        assert!(
            pidnet[3].tolerance.is_none() && pidnet[3].max_abs_error > 1e-3,
            "bf16 really ran in bf16"
        );
        assert!(check_pidnet::<Flex>(Path::new("/nonexistent"), &device)
            .unwrap_err()
            .contains("/nonexistent"));
    }
}
